//go:build unix

package redial_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/connectivity"

	"github.com/grpc-respawn/respawn/internal/respawntest"
	"github.com/grpc-respawn/respawn/internal/testpb"
	"github.com/grpc-respawn/respawn/redial"
)

// connected returns a Conn to a running test plugin, with its first
// generation marked healthy so that the next respawn runs at once.
func connected(t *testing.T, plugin *pluginHook, opts ...redial.Option) (*redial.Conn, *redial.Generation) {
	t.Helper()
	rc := respawntest.NewHost(t, plugin.Respawner(), nil, opts...).Conn
	g := rc.Current()
	// Without a policy, Conn.Invoke records the call served.
	if _, err := testpb.NewTestClient(rc).Get(respawntest.Context(t, 10*time.Second), &testpb.GetRequest{}); err != nil {
		t.Fatalf("Get: %v", err)
	}
	if !g.Served() {
		t.Fatal("a call through the Conn did not mark its plugin served")
	}
	return rc, g
}

func TestReplaceOutlivesCallerDeadline(t *testing.T) {
	plugin := newPluginHook(t)
	rec := &respawntest.Events{}
	rc, g1 := connected(t, plugin, redial.WithEventHandler(rec.Add))
	plugin.set("-start-delay", "1s")
	respawntest.Kill(t, g1)
	cause := errors.New("plugin died")

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	g, err := redial.HandleOf(rc).Replace(ctx, g1, cause)
	if !errors.Is(err, context.DeadlineExceeded) || g != nil {
		t.Fatalf("Replace with a short deadline: got %v, %v; want nil, DeadlineExceeded", g, err)
	}
	if got := rec.Count(redial.EventRespawnDone, 2); got != 0 {
		t.Fatalf("respawn of generation 2 done before the caller gave up: the plugin took less than 1s?")
	}

	g2, err := redial.HandleOf(rc).Replace(respawntest.Context(t, 20*time.Second), g1, cause)
	if err != nil {
		t.Fatalf("Replace: %v", err)
	}
	if got := g2.Number(); got != 2 {
		t.Errorf("generation %d, want 2", got)
	}
	rec.Wait(t, redial.EventRespawnStart, 2, 1) // delivered asynchronously
	if got := rec.Count(redial.EventRespawnStart, 2); got != 1 {
		t.Errorf("%d respawns of generation 2 started, want 1", got)
	}
	if got := plugin.calls.Load(); got != 2 {
		t.Errorf("hook calls = %d, want 2", got)
	}
	rec.Wait(t, redial.EventRespawnStart, 0, 2) // delivered asynchronously
	if got := rec.Count(redial.EventRespawnStart, 0); got != 2 {
		t.Errorf("%d respawn-start events, want 2 (first launch and one respawn)", got)
	}
	if rc.Current() != g2 {
		t.Error("Current() is not the generation Replace returned")
	}
	resp, err := testpb.NewTestClient(rc).Get(respawntest.Context(t, 10*time.Second), &testpb.GetRequest{})
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if got := resp.GetPid(); got != int64(g2.Process().PID) {
		t.Errorf("served by pid %d, want generation 2's %d", got, g2.Process().PID)
	}
}

func TestReplaceSingleFlight(t *testing.T) {
	plugin := newPluginHook(t)
	rc, g1 := connected(t, plugin)
	cause := errors.New("condemned")

	const callers = 64
	start := make(chan struct{})
	gens := make([]*redial.Generation, callers)
	errs := make([]error, callers)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			<-start
			gens[i], errs[i] = redial.HandleOf(rc).Replace(respawntest.Context(t, 20*time.Second), g1, cause)
		})
	}
	close(start)
	wg.Wait()

	if got := plugin.calls.Load(); got != 2 {
		t.Errorf("hook calls = %d, want 2 (first launch and one respawn)", got)
	}
	for i := range callers {
		if errs[i] != nil {
			t.Fatalf("caller %d: %v", i, errs[i])
		}
		if gens[i] != gens[0] || gens[i].Number() != 2 {
			t.Fatalf("caller %d got generation %d (%p), want caller 0's generation 2 (%p)", i, gens[i].Number(), gens[i], gens[0])
		}
	}
	// Asking again for g1's replacement starts nothing.
	if g, err := redial.HandleOf(rc).Replace(respawntest.Context(t, 20*time.Second), g1, cause); err != nil || g != gens[0] {
		t.Errorf("Replace(g1) again: got %v, %v; want generation 2", g, err)
	}
	if got := plugin.calls.Load(); got != 2 {
		t.Errorf("hook calls = %d after a late Replace, want 2", got)
	}
	if s := rc.Stats(); s.Respawns != 1 || s.FailedRespawns != 0 || s.CurrentGen != 2 {
		t.Errorf("Stats() = %+v, want 1 respawn, 0 failed, generation 2", s)
	}
}

func TestGracePeriod(t *testing.T) {
	tests := []struct {
		name  string
		grace time.Duration
		kill  bool // kill the old plugin before replacing it
	}{
		{name: "old plugin dead", grace: time.Hour, kill: true},
		{name: "old plugin alive, no grace", grace: -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plugin := newPluginHook(t)
			var h redial.Handle
			rc, g1 := connected(t, plugin, redial.WithPacing(redial.Pacing{GracePeriod: tt.grace}), respawntest.WithHandle(nil, &h))
			if tt.kill {
				respawntest.Kill(t, g1)
			}
			g2, err := redial.HandleOf(rc).Replace(respawntest.Context(t, 20*time.Second), g1, errors.New("replace it"))
			if err != nil {
				t.Fatalf("Replace: %v", err)
			}
			select {
			case <-g1.Retired():
			default:
				t.Error("Retired() not closed after the replacement")
			}
			if got := h.Route(g1.ClientConn()); got != g2 {
				t.Errorf("Route(old connection) = %v, want generation 2", got)
			}
			waitShutdown(t, g1.ClientConn())
			waitDone(t, g1.Process().Done(), "old plugin reaped")
			assertReaped(t, g1.Process().PID)
			if s := g2.ClientConn().GetState(); s == connectivity.Shutdown {
				t.Errorf("new connection is %v", s)
			}
		})
	}
	t.Run("old plugin alive, ends later", func(t *testing.T) {
		plugin := newPluginHook(t)
		rc, g1 := connected(t, plugin, redial.WithPacing(redial.Pacing{GracePeriod: time.Hour}))
		if _, err := redial.HandleOf(rc).Replace(respawntest.Context(t, 20*time.Second), g1, errors.New("replace it")); err != nil {
			t.Fatalf("Replace: %v", err)
		}
		waitDone(t, g1.Retired(), "old generation retired")
		// Within the grace the old plugin still serves calls in flight.
		if _, err := testpb.NewTestClient(g1.ClientConn()).Get(respawntest.Context(t, 10*time.Second), &testpb.GetRequest{}); err != nil {
			t.Fatalf("Get on the old connection during its grace: %v", err)
		}
		respawntest.Kill(t, g1)
		waitShutdown(t, g1.ClientConn())
	})
}

func TestStats(t *testing.T) {
	plugin := newPluginHook(t)
	rec := &respawntest.Events{}
	rc, g1 := connected(t, plugin, redial.WithEventHandler(rec.Add))
	if s := rc.Stats(); s != (redial.Stats{CurrentGen: 1}) {
		t.Errorf("after Connect: Stats() = %+v, want only CurrentGen 1", s)
	}
	respawntest.Kill(t, g1)
	rec.Wait(t, redial.EventExit, 1, 1)
	if _, err := redial.HandleOf(rc).Replace(respawntest.Context(t, 20*time.Second), g1, errors.New("died")); err != nil {
		t.Fatalf("Replace: %v", err)
	}
	rec.Wait(t, redial.EventRespawnDone, 2, 1)
	if s := rc.Stats(); s != (redial.Stats{Exits: 1, Crashes: 1, Respawns: 1, CurrentGen: 2}) {
		t.Errorf("after a respawn: Stats() = %+v, want 1 exit, 1 respawn, generation 2", s)
	}
}

// TestNext: a watcher follows the generations without polling and without
// starting respawns of its own.
func TestNext(t *testing.T) {
	rc := newConn(t, newPluginHook(t).Respawner())
	first := make(chan *redial.Generation, 1)
	go func() {
		g, err := redial.HandleOf(rc).Next(respawntest.Context(t, 20*time.Second), nil)
		if err != nil {
			t.Errorf("Next before the first plugin: %v", err)
		}
		first <- g
	}()
	if err := rc.Connect(respawntest.Context(t, 20*time.Second)); err != nil {
		t.Fatal(err)
	}
	g1 := <-first
	if g1 == nil || g1 != rc.Current() {
		t.Fatalf("Next returned %v, want the first generation", g1)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := redial.HandleOf(rc).Next(ctx, g1); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Next with no newer generation: got %v, want DeadlineExceeded", err)
	}
	if got := rc.Current(); got != g1 {
		t.Errorf("Next started a respawn: generation %d", got.Number())
	}

	respawntest.Kill(t, g1)
	next := make(chan *redial.Generation, 1)
	go func() {
		g, _ := redial.HandleOf(rc).Next(respawntest.Context(t, 20*time.Second), g1)
		next <- g
	}()
	g2, err := redial.HandleOf(rc).Replace(respawntest.Context(t, 20*time.Second), g1, errors.New("killed"))
	if err != nil {
		t.Fatal(err)
	}
	if got := <-next; got != g2 {
		t.Errorf("Next after a respawn returned generation %v, want %d", got, g2.Number())
	}

	closed := make(chan error, 1)
	go func() {
		_, err := redial.HandleOf(rc).Next(respawntest.Context(t, 20*time.Second), g2)
		closed <- err
	}()
	_ = rc.Close()
	if err := <-closed; !errors.Is(err, redial.ErrClosed) {
		t.Errorf("Next across Close: got %v, want ErrClosed", err)
	}
}
