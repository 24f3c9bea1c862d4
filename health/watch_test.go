//go:build unix

package health_test

import (
	"context"
	"errors"
	"os/exec"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/status"

	"github.com/grpc-respawn/respawn/health"
	"github.com/grpc-respawn/respawn/internal/respawntest"
	"github.com/grpc-respawn/respawn/internal/testpb"
	"github.com/grpc-respawn/respawn/redial"
	"github.com/grpc-respawn/respawn/redial/command"
)

// A plugin killed between calls is replaced before the next call, which
// then takes the fast path: no retry, one respawn.
func TestKilledWhileIdleIsRespawnedBeforeTheNextCall(t *testing.T) {
	// An interval of a minute: the exit is pushed, not found by a probe.
	h := newHost(t, nil, nil, health.WithInterval(time.Minute))
	old := h.rc.Current()
	respawntest.Kill(t, old)
	ctx := respawntest.Context(t, 20*time.Second)
	start := h.events.Wait(t, redial.EventRespawnStart, 2, 1)
	// redial pushes the exit itself; the watcher may see it first.
	var exit *exec.ExitError
	if !errors.As(start.Err, &exit) && !errors.Is(start.Err, health.ErrExited) && !errors.Is(start.Err, health.ErrUnreachable) {
		t.Errorf("respawn cause = %v, want the plugin's exit, health.ErrExited or health.ErrUnreachable", start.Err)
	}
	done := h.events.Wait(t, redial.EventRespawnDone, 2, 1)
	if done.Err != nil {
		t.Fatalf("respawn failed: %v", done.Err)
	}

	resp, err := h.client.Get(ctx, &testpb.GetRequest{Id: "after-kill"})
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if got, dead := resp.GetPid(), int64(old.Process().PID); got == dead {
		t.Errorf("answered by pid %d, the killed plugin", got)
	}
	s := h.rc.Stats()
	if s.Retries != 0 || s.Respawns != 1 {
		t.Errorf("retries = %d, respawns = %d; want 0 and 1", s.Retries, s.Respawns)
	}
}

// A stopped plugin keeps its process and socket: only the probe can find
// it. It is killed and replaced, and a call stuck on it is retried there.
func TestStoppedPluginIsKilledAndRespawned(t *testing.T) {
	h := newHost(t, nil, nil,
		health.WithInterval(100*time.Millisecond),
		health.WithTimeout(100*time.Millisecond),
		health.WithFailures(3))
	old := h.rc.Current()
	pid := old.Process().PID
	stop(t, pid)
	ctx := respawntest.Context(t, 20*time.Second)
	type result struct {
		resp *testpb.GetResponse
		err  error
	}
	answer := make(chan result, 1)
	go func() {
		resp, err := h.client.Get(ctx, &testpb.GetRequest{Id: "during-stop"})
		answer <- result{resp, err}
	}()

	hung := h.events.Wait(t, redial.EventHung, 1, 1)
	if !errors.Is(hung.Err, health.ErrHung) {
		t.Errorf("hung event cause = %v, want health.ErrHung", hung.Err)
	}
	select {
	case <-old.Process().Done():
	case <-ctx.Done():
		t.Fatal("stopped plugin was not killed")
	}
	if e, _ := old.Process().Exit(); e.Signal != syscall.SIGKILL {
		t.Errorf("stopped plugin ended with %v, want killed by SIGKILL", e)
	}
	if err := syscall.Kill(pid, syscall.SIGCONT); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("SIGCONT to the old plugin: got %v, want ESRCH", err)
	}

	var r result
	select {
	case r = <-answer:
	case <-ctx.Done():
		t.Fatal("call started during the stop never returned")
	}
	if r.err != nil {
		t.Fatalf("Get during the stop: %v", r.err)
	}
	if r.resp.GetPid() == int64(pid) {
		t.Errorf("answered by pid %d, the stopped plugin", pid)
	}
	if done := h.events.Wait(t, redial.EventRespawnDone, 2, 1); done.Err != nil {
		t.Errorf("respawn: %v", done.Err)
	}
	h.stop()
	s := h.rc.Stats()
	if s.Hung != 1 || s.Respawns != 1 {
		t.Errorf("hung = %d, respawns = %d; want 1 and 1", s.Hung, s.Respawns)
	}
}

// grpc-go's idle timeout makes a healthy connection IDLE, which is also
// what a lost connection looks like. The Watcher checks, and leaves a
// plugin that answers alone.
func TestIdleTimeoutIsNotDeath(t *testing.T) {
	h := newHost(t, nil,
		[]redial.Option{redial.WithDialOptions(grpc.WithIdleTimeout(50 * time.Millisecond))},
		health.WithInterval(time.Hour)) // no probes: only the state change acts
	g := h.rc.Current()
	c, _ := h.checks.Wait(t, 0, "check after IDLE", func(c health.Check) bool {
		return c.Trigger == health.StateChange && c.State == connectivity.Idle
	})
	if !c.Alive || c.Err != nil {
		t.Errorf("check of an idle connection: alive = %v, err = %v; want alive", c.Alive, c.Err)
	}
	// The handler runs after the Watcher acted, so a respawn it asked for
	// would be under way; Conn.Close waits for it, events included.
	h.stop()
	if n := h.respawnsAsked(); n != 0 {
		t.Errorf("%d respawns after an idle timeout, want 0", n)
	}
	if h.rc.Current() != g {
		t.Errorf("generation %d, want %d", h.rc.Current().Number(), g.Number())
	}
}

// Whatever the plugin answers, it answered: it is alive.
func TestAnyAnswerIsAlive(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		service string
		want    codes.Code
	}{
		{name: "serving", service: "plugin", want: codes.OK},
		{name: "unknown service", service: "no-such-service", want: codes.NotFound},
		{name: "no health service", args: []string{"-no-health"}, want: codes.Unimplemented},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			const probes = 5
			h := newHost(t, tt.args, nil,
				health.WithInterval(20*time.Millisecond),
				health.WithTimeout(5*time.Second), // a slow CI machine is not a hang
				health.WithFailures(1),            // so that any failure would act
				health.WithService(tt.service))
			from := 0
			for range probes {
				var c health.Check
				c, from = h.checks.Wait(t, from, "probe", func(c health.Check) bool { return c.Trigger == health.Probe })
				from++
				if got := status.Code(c.Err); !c.Alive || got != tt.want {
					t.Fatalf("probe: alive = %v, code = %v (%v); want alive, %v", c.Alive, got, c.Err, tt.want)
				}
			}
			h.stop()
			if n := h.respawnsAsked(); n != 0 {
				t.Errorf("%d respawns of a plugin that answered, want 0", n)
			}
		})
	}
}

// A respawn that fails leaves the dead plugin current; the Watcher asks
// again, and redial's pacing decides when the next launch runs.
func TestFailedRespawnIsAskedAgain(t *testing.T) {
	cmd := &command.Hook{Path: pluginPath}
	var failed atomic.Bool
	hook := redial.RespawnerFunc(func(ctx context.Context, req redial.Request) (redial.Backend, error) {
		if req.Generation == 2 && failed.CompareAndSwap(false, true) {
			return redial.Backend{}, errors.New("no memory for a new plugin")
		}
		return cmd.Respawn(ctx, req)
	})
	h := newHostWith(t, hook, nil, health.WithInterval(20*time.Millisecond))
	respawntest.Kill(t, h.rc.Current())
	ctx := respawntest.Context(t, 20*time.Second)
	first := h.events.Wait(t, redial.EventRespawnDone, 2, 1)
	if first.Err == nil {
		t.Fatal("first respawn succeeded; the hook should have failed it")
	}
	second := h.events.Wait(t, redial.EventRespawnDone, 2, 2)
	if second.Err != nil {
		t.Fatalf("second respawn: %v", second.Err)
	}
	if _, err := h.client.Get(ctx, &testpb.GetRequest{}); err != nil {
		t.Fatalf("Get: %v", err)
	}
	if s := h.rc.Stats(); s.Retries != 0 {
		t.Errorf("retries = %d, want 0: the plugin was replaced before the call", s.Retries)
	}
}

// A Watcher made before the first plugin starts finds it.
func TestWatchBeforeConnect(t *testing.T) {
	checks := &respawntest.Log[health.Check]{}
	rc, err := redial.New(&command.Hook{Path: pluginPath})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	w, err := health.Watch(rc, health.WithInterval(20*time.Millisecond), health.WithCheckHandler(checks.Add))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	ctx := respawntest.Context(t, 20*time.Second)
	if err := rc.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	c, _ := checks.Wait(t, 0, "probe", func(c health.Check) bool { return c.Trigger == health.Probe })
	if c.Generation != 1 || !c.Alive {
		t.Errorf("first probe: generation %d, alive %v; want 1, alive", c.Generation, c.Alive)
	}
}

// Close returns promptly whether the Conn was closed first or is still
// open, a second Close is a no-op, and closing the Watcher leaves the Conn
// usable. That the Watcher's goroutines are gone once Close returns is
// checked by goleak in TestMain. A nil Conn is an error, not a panic.
func TestClose(t *testing.T) {
	if _, err := health.Watch(nil); err == nil {
		t.Error("Watch(nil): got no error")
	}
	tests := []struct {
		name      string
		closeConn bool // close the Conn before the Watcher
	}{
		{name: "Conn closed first", closeConn: true},
		{name: "Conn still open", closeConn: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rc, err := redial.New(&command.Hook{Path: pluginPath})
			if err != nil {
				t.Fatal(err)
			}
			defer rc.Close()
			ctx := respawntest.Context(t, 20*time.Second)
			if err := rc.Connect(ctx); err != nil {
				t.Fatal(err)
			}
			w, err := health.Watch(rc, health.WithInterval(10*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			if tt.closeConn {
				_ = rc.Close()
			}
			closeWithin(t, w, 10*time.Second)
			closeWithin(t, w, 10*time.Second) // idempotent
			if tt.closeConn {
				return
			}
			if _, err := testpb.NewTestClient(rc).Get(ctx, &testpb.GetRequest{}); err != nil {
				t.Errorf("Get after the Watcher closed: %v; the Conn should stay usable", err)
			}
		})
	}
}

// closeWithin calls w.Close and fails t if it has not returned within d.
// On failure the goroutine calling Close is left behind, and goleak reports
// it too.
func closeWithin(t *testing.T, w *health.Watcher, d time.Duration) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.Close()
	}()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("Watcher.Close did not return within %v", d)
	}
}

// TestWatchZeroConn: a Watcher of a zero redial.Conn, which acts as a
// closed one, ends its work at once and closes. Before, its goroutine
// panicked and crashed the host.
func TestWatchZeroConn(t *testing.T) {
	w, err := health.Watch(&redial.Conn{})
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	closed := make(chan struct{})
	go func() { w.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(20 * time.Second):
		t.Fatal("Close of the Watcher did not return")
	}
}
