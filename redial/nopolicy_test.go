//go:build unix

package redial_test

import (
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"

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
				redial.WithBackOff(func() backoff.BackOff { return backoff.NewConstantBackOff(10 * time.Millisecond) }))
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
