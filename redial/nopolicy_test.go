//go:build unix

package redial_test

import (
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/grpc-respawn/respawn/internal/respawntest"
	"github.com/grpc-respawn/respawn/internal/testpb"
	"github.com/grpc-respawn/respawn/redial"
)

// TestNoPolicyDeadPluginIsReplaced: without a policy, a call made after the
// plugin died and was reaped waits for its successor instead of going to
// the dead plugin's closed connection (Generation.Gone), and a Conn whose
// respawn failed launches again on the next call.
func TestNoPolicyDeadPluginIsReplaced(t *testing.T) {
	calls := []struct {
		name string
		call func(*testing.T, testpb.TestClient) error
	}{
		{"unary", func(t *testing.T, c testpb.TestClient) error {
			_, err := c.Get(respawntest.Context(t, 20*time.Second), &testpb.GetRequest{})
			return err
		}},
		{"stream", func(t *testing.T, c testpb.TestClient) error {
			st, err := c.Watch(respawntest.Context(t, 20*time.Second), &testpb.WatchRequest{Count: 1})
			if err != nil {
				return err
			}
			_, err = st.Recv()
			return err
		}},
	}
	for _, tc := range calls {
		t.Run(tc.name, func(t *testing.T) {
			plugin := newPluginHook(t)
			events := &respawntest.Events{}
			rc := newConn(t, plugin.Respawner(), redial.WithEventHandler(events.Add),
				redial.WithPacing(redial.Pacing{BackOff: func() backoff.BackOff { return backoff.NewConstantBackOff(10 * time.Millisecond) }}))
			client := testpb.NewTestClient(rc)
			if err := tc.call(t, client); err != nil {
				t.Fatalf("first call: %v", err)
			}

			respawntest.Kill(t, rc.Current()) // returns once the plugin is reaped
			if err := tc.call(t, client); err != nil {
				t.Fatalf("call after the plugin died: %v", err)
			}

			plugin.set("-exit-at-start")
			g := rc.Current()
			respawntest.Kill(t, g)
			events.Log.Wait(t, 0, "the failed respawn", func(e redial.Event) bool {
				return e.Kind == redial.EventRespawnDone && e.Generation == g.Number()+1 && e.Err != nil
			})
			plugin.set()
			if err := tc.call(t, client); err != nil {
				t.Fatalf("call after a failed respawn: %v", err)
			}
			if got := rc.Current().Number(); got != g.Number()+1 {
				t.Errorf("current plugin %d, want %d", got, g.Number()+1)
			}
		})
	}
}

// TestNoPolicyBoundStubFollowsThePlugin: without a policy, a stub bound to
// the first plugin's connection — as a go-plugin host dispenses it — is
// routed to each successor once its plugin has died (unary and stream),
// instead of failing for good with "the client connection is closing" as
// the first connection's stub did.
func TestNoPolicyBoundStubFollowsThePlugin(t *testing.T) {
	rc := newConn(t, newPluginHook(t).Respawner())
	ctx := respawntest.Context(t, 30*time.Second)
	if err := rc.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	first := rc.Current()
	stub := testpb.NewTestClient(first.ClientConn()) // bound to plugin 1
	for kill := 1; kill <= 3; kill++ {
		respawntest.Kill(t, rc.Current()) // returns once the plugin is reaped
		resp, err := stub.Get(ctx, &testpb.GetRequest{})
		if err != nil {
			t.Fatalf("unary Get on the first connection after kill %d: %v", kill, err)
		}
		if got, want := resp.GetPid(), int64(rc.Current().Process().PID); got != want {
			t.Errorf("after kill %d: answered by pid %d, want the current plugin %d", kill, got, want)
		}
		st, err := stub.Watch(ctx, &testpb.WatchRequest{Count: 1})
		if err == nil {
			_, err = st.Recv()
		}
		if err != nil {
			t.Fatalf("stream on the first connection after kill %d: %v", kill, err)
		}
	}
	if got := rc.Current().Number(); got != 4 {
		t.Errorf("current plugin %d, want 4", got)
	}
}

// TestNoPolicyHealthCheckIsNotService: without a policy, a grpc.health.v1
// check (as go-plugin's Ping makes), on the Conn or on a stub bound to the
// plugin's connection, does not count as the plugin serving a call — it
// would keep a plugin that dies on every real call out of the crash-loop
// breaker; a Get does.
func TestNoPolicyHealthCheckIsNotService(t *testing.T) {
	rc := newConn(t, newPluginHook(t).Respawner())
	ctx := respawntest.Context(t, 20*time.Second)
	if err := rc.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	g := rc.Current()
	for _, cc := range []grpc.ClientConnInterface{rc, g.ClientConn()} {
		if _, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
			t.Fatalf("Check: %v", err)
		}
	}
	if g.Served() {
		t.Fatal("a health check marked the plugin served")
	}
	if _, err := testpb.NewTestClient(rc).Get(ctx, &testpb.GetRequest{}); err != nil {
		t.Fatalf("Get: %v", err)
	}
	if !g.Served() {
		t.Error("a Get did not mark the plugin served")
	}
}

// TestNoPolicyStreamIsService: without a policy, a stream that received a
// message marks its plugin served, as a unary answer does, so that a
// plugin used only through streams and killed from outside now and then
// does not open the crash-loop breaker.
func TestNoPolicyStreamIsService(t *testing.T) {
	rc := newConn(t, newPluginHook(t).Respawner())
	ctx := respawntest.Context(t, 20*time.Second)
	if err := rc.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	g := rc.Current()
	st, err := testpb.NewTestClient(rc).Watch(ctx, &testpb.WatchRequest{Count: 1})
	if err != nil {
		t.Fatal(err)
	}
	if g.Served() {
		t.Fatal("opening a stream marked the plugin served")
	}
	if _, err := st.Recv(); err != nil {
		t.Fatalf("Recv: %v", err)
	}
	if !g.Served() {
		t.Error("a stream that received a message did not mark its plugin served")
	}
}
