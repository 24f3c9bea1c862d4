//go:build unix

package redial_test

import (
	"context"
	"errors"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/grpc-respawn/respawn/interceptor"
	"github.com/grpc-respawn/respawn/internal/respawntest"
	"github.com/grpc-respawn/respawn/internal/testpb"
	"github.com/grpc-respawn/respawn/redial"
	"github.com/grpc-respawn/respawn/redial/internal/proc"
)

// spareHook wraps a pluginHook and counts the launches asked for as spares.
type spareHook struct {
	*pluginHook
	spares atomic.Int32
	// onSpare, if set, runs before a spare's launch.
	onSpare func()
	// failSpares: that many spare launches fail, the hook's error.
	failSpares atomic.Int32
	// promote, if set, is the spares' Backend.Promote, given the pid.
	promote func(pid int) error
}

func (h *spareHook) Respawner() redial.Respawner {
	inner := h.pluginHook.Respawner()
	return respawntest.RespawnerFunc(func(ctx context.Context, req redial.Request) (redial.Backend, error) {
		if req.Spare {
			if req.Generation != 0 {
				return redial.Backend{}, errors.New("spare asked for with a generation number")
			}
			h.spares.Add(1)
			if h.onSpare != nil {
				h.onSpare()
			}
			if h.failSpares.Add(-1) >= 0 {
				return redial.Backend{}, errors.New("spare launch failed, as asked")
			}
		}
		b, err := inner.Respawn(ctx, req)
		if err == nil && req.Spare && h.promote != nil {
			pid := b.Process.PID
			b.Promote = func(context.Context) error { return h.promote(pid) }
		}
		return b, err
	})
}

// standbyConn returns a Conn with Pacing{Spares: n} and an interceptor
// policy, its first plugin up and n spares ready (their pids returned).
func standbyConn(t *testing.T, h *spareHook, rec *respawntest.Events, n int, opts ...redial.Option) (*redial.Conn, []int) {
	t.Helper()
	opts = append([]redial.Option{redial.WithPacing(redial.Pacing{Spares: n}), redial.WithPolicy(interceptor.New()), redial.WithEventHandler(rec.Add)}, opts...)
	rc := newConn(t, h.Respawner(), opts...)
	if err := rc.Connect(respawntest.Context(t, 20*time.Second)); err != nil {
		t.Fatalf("Connect: %v", err)
	}
	var pids []int
	for i := 1; i <= n; i++ {
		pids = append(pids, rec.WaitFor(t, "spare ready", respawntest.SpareReady, i).Exit.PID)
	}
	return rc, pids
}

// TestStandbyPromotedOnKill: after a SIGKILL the next call is answered by
// the spare launched before it, and a new spare is launched behind.
func TestStandbyPromotedOnKill(t *testing.T) {
	h := &spareHook{pluginHook: newPluginHook(t)}
	rec := &respawntest.Events{}
	rc, pids := standbyConn(t, h, rec, 1)
	client := testpb.NewTestClient(rc)
	ctx := respawntest.Context(t, 20*time.Second)
	if _, err := client.Get(ctx, &testpb.GetRequest{}); err != nil {
		t.Fatal(err)
	}
	g1 := rc.Current()
	launches := h.calls.Load()
	respawntest.Kill(t, g1)

	resp, err := client.Get(ctx, &testpb.GetRequest{Id: "after-kill"})
	if err != nil {
		t.Fatalf("Get after SIGKILL: %v", err)
	}
	if got := int(resp.GetPid()); got != pids[0] {
		t.Errorf("answered by pid %d, want the spare's %d", got, pids[0])
	}
	e := rec.WaitFor(t, "spare promoted to generation 2", respawntest.OfGeneration(2, respawntest.SparePromoted), 1)
	t.Logf("spare promoted %v after the respawn began", e.Duration)
	if got := rc.Current().Process().PID; got != pids[0] {
		t.Errorf("current plugin pid %d, want the spare's %d", got, pids[0])
	}
	// The replacement spare: launched behind, not for the call.
	rec.WaitFor(t, "spare ready", respawntest.SpareReady, 2)
	if got := h.calls.Load() - launches; got != 1 {
		t.Errorf("%d launches after the kill, want 1 (the new spare)", got)
	}
	if s := rc.Stats(); s.SparesTaken != 1 || s.SparesMissing != 0 {
		t.Errorf("Stats: %d spares taken, %d missing; want 1, 0", s.SparesTaken, s.SparesMissing)
	}
}

// TestStandbySpareKilledInPromote: a spare whose process is SIGKILLed
// while its Promote hook runs (the hook returns nil) is found dying by the
// check that follows the hook, discarded, and a plugin launched instead:
// the call after the kill is answered by neither the dead plugin nor the
// dead spare, and no spare is reported promoted.
func TestStandbySpareKilledInPromote(t *testing.T) {
	h := &spareHook{pluginHook: newPluginHook(t)}
	h.promote = func(pid int) error { return syscall.Kill(pid, syscall.SIGKILL) }
	rec := &respawntest.Events{}
	rc, pids := standbyConn(t, h, rec, 1)
	client := testpb.NewTestClient(rc)
	ctx := respawntest.Context(t, 20*time.Second)
	g1 := rc.Current()
	respawntest.Kill(t, g1)

	resp, err := client.Get(ctx, &testpb.GetRequest{Id: "after-kill"})
	if err != nil {
		t.Fatalf("Get after SIGKILL: %v", err)
	}
	if got := int(resp.GetPid()); got == pids[0] || got == g1.Process().PID {
		t.Errorf("answered by pid %d: the spare (%d) or the killed plugin (%d)", got, pids[0], g1.Process().PID)
	}
	e := rec.WaitFor(t, "generation 2 up", respawntest.OfGeneration(2, func(e redial.Event) bool {
		return e.Kind == redial.EventRespawnDone && e.Err == nil
	}), 1)
	if e.Spare {
		t.Errorf("generation 2 reported a promoted spare; its process was killed in Promote")
	}
	rec.WaitFor(t, "the killed spare wasted", respawntest.SpareWasted, 1)
	if s := rc.Stats(); s.SparesMissing != 1 {
		t.Errorf("Stats: %d spares missing, want 1 (the one killed in Promote)", s.SparesMissing)
	}
}

// TestStandbySpareDeath: a spare that dies is discarded (wasted, with its
// exit), reaped and replaced, and its replacement is the one promoted.
func TestStandbySpareDeath(t *testing.T) {
	h := &spareHook{pluginHook: newPluginHook(t)}
	rec := &respawntest.Events{}
	rc, pids := standbyConn(t, h, rec, 1)
	if err := syscall.Kill(pids[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	e := rec.WaitFor(t, "spare wasted", respawntest.SpareWasted, 1)
	var ee *proc.ExitError
	if !errors.As(e.Err, &ee) || ee.Exit.PID != pids[0] || ee.Exit.Signal != syscall.SIGKILL {
		t.Errorf("wasted spare's error %v, want its SIGKILL exit (pid %d)", e.Err, pids[0])
	}
	second := rec.WaitFor(t, "spare ready", respawntest.SpareReady, 2).Exit.PID
	assertReaped(t, pids[0])

	respawntest.Kill(t, rc.Current())
	resp, err := testpb.NewTestClient(rc).Get(respawntest.Context(t, 20*time.Second), &testpb.GetRequest{})
	if err != nil {
		t.Fatalf("Get after SIGKILL: %v", err)
	}
	if got := int(resp.GetPid()); got != second {
		t.Errorf("answered by pid %d, want the second spare's %d", got, second)
	}
	if s := rc.Stats(); s.SparesWasted != 1 || s.SparesTaken != 1 {
		t.Errorf("Stats: %d wasted, %d taken; want 1, 1", s.SparesWasted, s.SparesTaken)
	}
}

// TestStandbyClose: Close stops the plugin and its spares, as closed.
func TestStandbyClose(t *testing.T) {
	h := &spareHook{pluginHook: newPluginHook(t)}
	rec := &respawntest.Events{}
	rc, pids := standbyConn(t, h, rec, 2)
	cur := rc.Current().Process().PID
	if err := rc.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	rec.Wait(t, redial.EventClosed, 0, 1) // the last event: the others have been seen
	for _, pid := range append(pids, cur) {
		assertReaped(t, pid)
	}
	closed := 0
	for _, e := range rec.All() {
		if e.Kind == redial.EventExit && e.Exit.Reason == "closed" {
			closed++
		}
	}
	if closed != 3 {
		t.Errorf("%d exits with reason closed, want 3 (the plugin and 2 spares)", closed)
	}
}

// TestStandbyCloseDuringSpareLaunch closes the Conn while spares are being
// launched (slow starts): nothing is left running (goleak, reaped pids).
func TestStandbyCloseDuringSpareLaunch(t *testing.T) {
	asked := make(chan struct{}, 2)
	h := &spareHook{pluginHook: newPluginHook(t, "-start-delay", "100ms"), onSpare: func() { asked <- struct{}{} }}
	rec := &respawntest.Events{}
	rc := newConn(t, h.Respawner(), redial.WithPacing(redial.Pacing{Spares: 2}), redial.WithEventHandler(rec.Add))
	if err := rc.Connect(respawntest.Context(t, 20*time.Second)); err != nil {
		t.Fatal(err)
	}
	cur := rc.Current().Process().PID
	waitDone(t, asked, "a spare's launch")
	if err := rc.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	rec.Wait(t, redial.EventClosed, 0, 1) // the last event: the others have been seen
	assertReaped(t, cur)
	for _, e := range rec.All() {
		if respawntest.SpareReady(e) {
			t.Errorf("a spare became ready (pid %d) although Close came during its 100ms start", e.Exit.PID)
		}
		if e.Kind == redial.EventExit {
			if e.Exit.Reason == "crashed" {
				t.Errorf("exit reported as a crash: %v", e.Exit)
			}
			assertReaped(t, e.Exit.PID)
		}
	}
}

// TestStandbyBreakerOpen: no spare is launched while the breaker is open,
// a dead one is not replaced then, and Reset starts launching them again.
func TestStandbyBreakerOpen(t *testing.T) {
	var opened, reset atomic.Bool
	h := &spareHook{pluginHook: newPluginHook(t)}
	var violations atomic.Int32
	h.onSpare = func() {
		if opened.Load() && !reset.Load() {
			violations.Add(1)
		}
	}
	rec := &respawntest.Events{}
	// Plugins that serve nothing: the second promotion opens the breaker
	// once the promoted spare crashes (SIGABRT: a Go crash, exit code 2;
	// a SIGKILL from outside is forgiven a promoted spare).
	rc, pids := standbyConn(t, h, rec, 1, redial.WithPacing(redial.Pacing{CrashLoopLaunches: 2, CrashLoopWindow: time.Minute, CrashLoopCoolDown: time.Hour}))
	ctx := respawntest.Context(t, 20*time.Second)
	g1 := rc.Current()
	respawntest.Kill(t, g1)
	g2, err := redial.HandleOf(rc).Replace(ctx, g1, errors.New("died"))
	if err != nil || g2.Process().PID != pids[0] {
		t.Fatalf("Replace: %v; want the spare %d promoted", err, pids[0])
	}
	spareB := rec.WaitFor(t, "spare ready", respawntest.SpareReady, 2).Exit.PID
	if err := syscall.Kill(g2.Process().PID, syscall.SIGABRT); err != nil {
		t.Fatal(err)
	}
	waitDone(t, g2.Process().Done(), "the promoted spare's exit")
	if _, err := redial.HandleOf(rc).Replace(ctx, g2, errors.New("died")); !errors.Is(err, redial.ErrCrashLoop) {
		t.Fatalf("Replace: %v, want the breaker open", err)
	}
	opened.Store(true)
	// The spare that dies while the breaker is open is not replaced.
	if err := syscall.Kill(spareB, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	rec.WaitFor(t, "spare wasted", respawntest.SpareWasted, 1)
	if err := rc.Rotate(ctx); !errors.Is(err, redial.ErrCrashLoop) {
		t.Errorf("Rotate with the breaker open: %v, want ErrCrashLoop", err)
	}
	// Rotate took c.mu after the dead spare's handler released it: a
	// replacement would be launching by now, although its hook may be
	// called only after the Reset below (which onSpare then misses).
	if launching, ready := redial.SpareCounts(rc); launching != 0 || ready != 0 {
		t.Errorf("with the breaker open: %d spares launching, %d ready; want none", launching, ready)
	}
	reset.Store(true)
	spares := h.spares.Load()
	rc.Reset()
	rec.WaitFor(t, "spare ready", respawntest.SpareReady, 3)
	if got := violations.Load(); got != 0 {
		t.Errorf("%d spares launched while the breaker was open, want 0", got)
	}
	if got := h.spares.Load() - spares; got != 1 {
		t.Errorf("%d spares launched after Reset, want 1", got)
	}
}

// TestStandbyRotate: with a spare ready, Rotate promotes it.
func TestStandbyRotate(t *testing.T) {
	h := &spareHook{pluginHook: newPluginHook(t)}
	rec := &respawntest.Events{}
	rc, pids := standbyConn(t, h, rec, 1, redial.WithPacing(redial.Pacing{GracePeriod: 100 * time.Millisecond}))
	g1 := rc.Current()
	if err := rc.Rotate(respawntest.Context(t, 20*time.Second)); err != nil {
		t.Fatalf("Rotate: %v", err)
	}
	if got := rc.Current().Process().PID; got != pids[0] {
		t.Errorf("current pid %d after Rotate, want the spare's %d", got, pids[0])
	}
	if e := rec.Wait(t, redial.EventExit, g1.Number(), 1); e.Exit.Reason != "retired" {
		t.Errorf("rotated plugin's exit %v, want retired", e.Exit)
	}
}

// TestStandbyWithoutHealthService: a plugin that does not serve
// grpc.health.v1 (Unimplemented) still makes a spare, and is promoted.
func TestStandbyWithoutHealthService(t *testing.T) {
	h := &spareHook{pluginHook: newPluginHook(t, "-no-health")}
	rec := &respawntest.Events{}
	rc, pids := standbyConn(t, h, rec, 1)
	respawntest.Kill(t, rc.Current())
	resp, err := testpb.NewTestClient(rc).Get(respawntest.Context(t, 20*time.Second), &testpb.GetRequest{})
	if err != nil || int(resp.GetPid()) != pids[0] {
		t.Fatalf("Get after SIGKILL: %v, pid %d; want answered by the spare %d", err, resp.GetPid(), pids[0])
	}
	if got := rc.Stats().SparesWasted; got != 0 {
		t.Errorf("%d spares wasted, want 0", got)
	}
}

// TestStandbySpareLaunchRetried: a spare launch that fails once is tried
// again after the backoff, so the Conn has its spare without waiting for
// its plugin to die; a WithBackOff func that returns nil means the default
// backoff here too.
func TestStandbySpareLaunchRetried(t *testing.T) {
	for _, tt := range []struct {
		name string
		opts []redial.Option
	}{
		{"default", nil},
		{"nil-backoff", []redial.Option{redial.WithPacing(redial.Pacing{BackOff: func() backoff.BackOff { return nil }})}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := &spareHook{pluginHook: newPluginHook(t)}
			h.failSpares.Store(1)
			rec := &respawntest.Events{}
			rc, pids := standbyConn(t, h, rec, 1, tt.opts...)
			e := rec.WaitFor(t, "spare wasted", respawntest.SpareWasted, 1)
			wantContains(t, e.Err, "spare launch failed, as asked")
			if got := h.spares.Load(); got != 2 {
				t.Errorf("%d spare launches, want 2 (the failed one, then the spare %d)", got, pids[0])
			}
			g1 := rc.Current()
			respawntest.Kill(t, g1)
			g2, err := redial.HandleOf(rc).Replace(respawntest.Context(t, 20*time.Second), g1, errors.New("died"))
			if err != nil || g2.Process().PID != pids[0] {
				t.Fatalf("Replace: %v; want the spare %d promoted", err, pids[0])
			}
		})
	}
}

// TestStandbySpareLaunchGivesUp: spare launches that keep failing are
// tried 5 times in a row, then no more while no plugin comes up; they do
// not open the breaker, and the plugin serves all along.
func TestStandbySpareLaunchGivesUp(t *testing.T) {
	const launches = 5
	h := &spareHook{pluginHook: newPluginHook(t)}
	h.failSpares.Store(1 << 20)
	rec := &respawntest.Events{}
	rc := newConn(t, h.Respawner(), redial.WithPacing(redial.Pacing{Spares: 1}), redial.WithEventHandler(rec.Add),
		redial.WithPacing(redial.Pacing{CrashLoopLaunches: 1, CrashLoopWindow: time.Minute, CrashLoopCoolDown: time.Hour}),
		redial.WithPacing(redial.Pacing{BackOff: func() backoff.BackOff { return backoff.NewConstantBackOff(time.Millisecond) }}))
	ctx := respawntest.Context(t, 20*time.Second)
	if err := rc.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	rec.WaitFor(t, "spare wasted", respawntest.SpareWasted, launches)
	if _, err := testpb.NewTestClient(rc).Get(ctx, &testpb.GetRequest{}); err != nil {
		t.Fatalf("Get: %v", err)
	}
	if err := rc.Close(); err != nil { // waits for any spare launch decided before
		t.Fatal(err)
	}
	rec.Wait(t, redial.EventClosed, 0, 1) // the last event: the others have been seen
	if got := h.spares.Load(); got != launches {
		t.Errorf("%d spare launches, want %d", got, launches)
	}
}
