//go:build unix

package health_test

import (
	"context"
	"errors"
	"os/exec"
	"strings"
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
	h := newHost(t, nil, nil, health.Config{Interval: time.Minute})
	old := h.rc.Current()
	respawntest.Kill(t, old)
	ctx := respawntest.Context(t, 20*time.Second)
	start := h.events.Wait(t, redial.EventRespawnStart, 2, 1)
	// redial pushes the exit itself; the watcher may see it first.
	// Either gives the exit; a check that confirmed the lost connection
	// gives its codes.Unavailable.
	var exit *exec.ExitError
	unreachable := status.Code(start.Err) == codes.Unavailable && strings.HasPrefix(start.Err.Error(), "health: plugin unreachable: ")
	if !errors.As(start.Err, &exit) && !unreachable {
		t.Errorf("respawn cause = %v, want the plugin's exit or health's unreachable (codes.Unavailable)", start.Err)
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
	h := newHost(t, nil, nil, health.Config{
		Interval: 100 * time.Millisecond,
		Timeout:  100 * time.Millisecond,
		Failures: 3,
	})
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
// what a lost connection looks like. The watcher checks, and leaves a
// plugin that answers alone.
func TestIdleTimeoutIsNotDeath(t *testing.T) {
	h := newHost(t, nil,
		[]redial.Option{redial.WithDialOptions(grpc.WithIdleTimeout(50 * time.Millisecond))},
		health.Config{Interval: time.Hour}) // no probes: only the state change acts
	g := h.rc.Current()
	c, _ := h.checks.Wait(t, 0, "check after IDLE", func(c health.Check) bool {
		return c.StateChange && c.State == connectivity.Idle
	})
	if !c.Alive || c.Err != nil {
		t.Errorf("check of an idle connection: alive = %v, err = %v; want alive", c.Alive, c.Err)
	}
	// The handler runs after the watcher acted, so a respawn it asked for
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
			h := newHost(t, tt.args, nil, health.Config{
				Service:  tt.service,
				Interval: 20 * time.Millisecond,
				Timeout:  5 * time.Second, // a slow CI machine is not a hang
				Failures: 1,               // so that any failure would act
			})
			from := 0
			for range probes {
				var c health.Check
				c, from = h.checks.Wait(t, from, "probe", func(c health.Check) bool { return !c.StateChange })
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

// A respawn that fails leaves the dead plugin current; the watcher asks
// again, and redial's pacing decides when the next launch runs.
func TestFailedRespawnIsAskedAgain(t *testing.T) {
	cmd := &command.Hook{Path: pluginPath}
	var failed atomic.Bool
	hook := respawntest.RespawnerFunc(func(ctx context.Context, req redial.Request) (redial.Backend, error) {
		if req.Generation == 2 && failed.CompareAndSwap(false, true) {
			return redial.Backend{}, errors.New("no memory for a new plugin")
		}
		return cmd.Respawn(ctx, req)
	})
	h := newHostWith(t, hook, nil, health.Config{Interval: 20 * time.Millisecond})
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

// A watch started before the first plugin starts finds it.
func TestWatchBeforeConnect(t *testing.T) {
	checks := &respawntest.Log[health.Check]{}
	rc, err := redial.New(&command.Hook{Path: pluginPath},
		watching(nil, health.Observed(health.Config{Interval: 20 * time.Millisecond}, checks.Add)))
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	ctx := respawntest.Context(t, 20*time.Second)
	if err := rc.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	c, _ := checks.Wait(t, 0, "probe", func(c health.Check) bool { return !c.StateChange })
	if c.Generation != 1 || !c.Alive {
		t.Errorf("first probe: generation %d, alive %v; want 1, alive", c.Generation, c.Alive)
	}
}

// The Conn's Close stops the watch, before it stops the plugin: no check
// runs once the plugin is being stopped, Close returns promptly, and the
// watch's goroutines are gone once it has (goleak, in TestMain). A nil
// Handle is an error, not a panic.
func TestCloseStopsTheWatch(t *testing.T) {
	if err := health.Watch(nil, health.Config{}); err == nil {
		t.Error("Watch(nil): got no error")
	}
	checks := &respawntest.Log[health.Check]{}
	rc, err := redial.New(&command.Hook{Path: pluginPath},
		watching(nil, health.Observed(health.Config{Interval: 10 * time.Millisecond}, checks.Add)))
	if err != nil {
		t.Fatal(err)
	}
	ctx := respawntest.Context(t, 20*time.Second)
	if err := rc.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	checks.Wait(t, 0, "probe", func(c health.Check) bool { return !c.StateChange })
	done := make(chan error, 1)
	go func() { done <- rc.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Close: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close of a watched Conn did not return within 10s")
	}
	for _, c := range checks.All() {
		if !c.Alive {
			t.Errorf("a check saw the plugin %s: the watch outlived the start of Close", c.Err)
		}
	}
}
