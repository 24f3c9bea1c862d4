package goplugin_test

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/grpc-respawn/respawn/internal/respawntest"
	"github.com/grpc-respawn/respawn/internal/testpb"
	"github.com/grpc-respawn/respawn/redial"
)

// TestExitIsReported checks that a SIGKILL (what the OOM killer sends)
// shows in the exit of the generation's process, and that a stub dispensed
// once works on the plugin that replaces it.
func TestExitIsReported(t *testing.T) {
	h := newHost(t, setup{})
	g := h.rc.Current()
	respawntest.Kill(t, g)
	e, ok := g.Process().Exit()
	if !ok {
		t.Fatal("Exit: process still running after it was reaped")
	}
	if e.Signal != syscall.SIGKILL || e.Code != -1 || e.PID != g.Process().PID {
		t.Errorf("Exit = %+v, want pid %d killed by SIGKILL, code -1", e, g.Process().PID)
	}
	resp, err := h.client.Get(respawntest.Context(t, 20*time.Second), &testpb.GetRequest{})
	if err != nil {
		t.Fatalf("Get after kill: %v", err)
	}
	if resp.GetPid() == int64(g.Process().PID) {
		t.Errorf("answered by pid %d, the killed plugin", resp.GetPid())
	}
}

// awaitKill runs c.Kill and fails the test if it does not return within
// 10s: go-plugin's Kill must never wait on a respawn.
func awaitKill(t *testing.T, kill func()) time.Duration {
	t.Helper()
	began := time.Now()
	done := make(chan struct{})
	go func() {
		kill()
		close(done)
	}()
	select {
	case <-done:
		return time.Since(began)
	case <-respawntest.Context(t, 10*time.Second).Done():
		t.Fatal("Kill did not return within 10s")
		return 0
	}
}

func TestKillNeverReachesTheSuccessor(t *testing.T) {
	t.Run("Kill of the dead current client does not respawn", func(t *testing.T) {
		h := newHost(t, setup{})
		g1 := h.rc.Current()
		respawntest.Kill(t, g1)
		c1 := h.hook.ClientOf(g1)
		if c1 == nil {
			t.Fatal("Client(g1) = nil")
		}
		d := awaitKill(t, c1.Kill)
		t.Logf("Kill of the dead current client returned in %v", d)
		if st := h.rc.Stats(); st.Respawns != 0 || st.CurrentGen != 1 {
			t.Errorf("after Kill: respawns %d, generation %d; want 0 and 1 (Shutdown must not respawn)", st.Respawns, st.CurrentGen)
		}
		resp, err := h.client.Get(respawntest.Context(t, 20*time.Second), &testpb.GetRequest{})
		if err != nil {
			t.Fatalf("Get after Kill: %v", err)
		}
		if resp.GetPid() == int64(g1.Process().PID) {
			t.Errorf("answered by the killed plugin")
		}
		if got := h.rc.Stats().Respawns; got != 1 {
			t.Errorf("respawns = %d, want 1", got)
		}
	})

	t.Run("Kill of a live retired client stops only its own plugin", func(t *testing.T) {
		// A long grace period keeps the retired plugin alive, so its
		// Shutdown would reach the successor if it were rerouted.
		h := newHost(t, setup{ropts: []redial.Option{redial.WithPacing(redial.Pacing{GracePeriod: time.Minute})}})
		g1 := h.rc.Current()
		c1 := h.hook.ClientOf(g1)
		if err := h.rc.Rotate(respawntest.Context(t, 20*time.Second)); err != nil {
			t.Fatalf("Rotate: %v", err)
		}
		g2 := h.waitGeneration(t, 2)
		d := awaitKill(t, c1.Kill)
		t.Logf("Kill of the live retired client returned in %v", d)
		select {
		case <-g1.Process().Done():
		case <-respawntest.Context(t, 10*time.Second).Done():
			t.Fatal("the retired plugin still runs after its client's Kill")
		}
		if e, _ := g1.Process().Exit(); e.Signal != 0 {
			t.Errorf("retired plugin: %v, want a graceful exit (Shutdown reached it)", e)
		}
		if _, exited := g2.Process().Exit(); exited {
			t.Fatal("the new plugin exited: the old client's Shutdown reached it")
		}
		resp, err := h.client.Get(respawntest.Context(t, 20*time.Second), &testpb.GetRequest{})
		if err != nil {
			t.Fatalf("Get: %v", err)
		}
		if got, want := resp.GetPid(), int64(g2.Process().PID); got != want {
			t.Errorf("answered by pid %d, want the new plugin %d", got, want)
		}
		if st := h.rc.Stats(); st.Respawns != 1 || st.CurrentGen != 2 {
			t.Errorf("respawns %d, generation %d; want 1 and 2", st.Respawns, st.CurrentGen)
		}
	})

	t.Run("redial's Stop of the old plugin returns and the new one serves", func(t *testing.T) {
		type stopped struct {
			gen uint64
			d   time.Duration
			err error
		}
		stops := make(chan stopped, 8)
		wrap := func(r redial.Respawner) redial.Respawner {
			return respawntest.RespawnerFunc(func(ctx context.Context, req redial.Request) (redial.Backend, error) {
				b, err := r.Respawn(ctx, req)
				if stop := b.Stop; stop != nil {
					b.Stop = func() error {
						began := time.Now()
						err := stop()
						stops <- stopped{req.Generation, time.Since(began), err}
						return err
					}
				}
				return b, err
			})
		}
		h := newHost(t, setup{wrap: wrap})
		g1 := h.rc.Current()
		respawntest.Kill(t, g1)
		if _, err := h.client.Get(respawntest.Context(t, 20*time.Second), &testpb.GetRequest{}); err != nil {
			t.Fatalf("Get after kill: %v", err)
		}
		g2 := h.rc.Current()
		select {
		case s := <-stops:
			if s.gen != g1.Number() || s.err != nil {
				t.Fatalf("Stop of plugin %d: %v; want plugin %d stopped without error", s.gen, s.err, g1.Number())
			}
			t.Logf("Stop (SIGKILL + Client.Kill) of the dead plugin took %v", s.d)
		case <-respawntest.Context(t, 10*time.Second).Done():
			t.Fatal("redial never stopped the dead plugin, or Stop blocked")
		}
		resp, err := h.client.Get(respawntest.Context(t, 20*time.Second), &testpb.GetRequest{})
		if err != nil {
			t.Fatalf("Get after the old client was killed: %v", err)
		}
		if got, want := resp.GetPid(), int64(g2.Process().PID); got != want {
			t.Errorf("answered by pid %d, want the new plugin %d", got, want)
		}
		if got := h.rc.Stats().CurrentGen; got != 2 {
			t.Errorf("generation %d, want 2 (no respawn after the old client's Kill)", got)
		}
	})
}
