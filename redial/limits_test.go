//go:build unix

package redial_test

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grpc-respawn/respawn/internal/respawntest"
	"github.com/grpc-respawn/respawn/internal/testpb"
	"github.com/grpc-respawn/respawn/redial"
)

// TestLaunchRateBoundsServeAndDie: a plugin that dies right after serving
// each call is never a crash loop, so only the rate bound stops the host
// from forking without limit. With a burst of 3 and a rate that refills no
// token during the test, the 4th launch waits: the caller's deadline ends
// first, and after Close (which waits for the respawn) no 4th plugin ran.
func TestLaunchRateBoundsServeAndDie(t *testing.T) {
	plugin := newPluginHook(t, "-die-after-calls", "1")
	rc := newConn(t, plugin.Respawner(), redial.WithPacing(redial.Pacing{LaunchRate: 1e-6, LaunchBurst: 3}))
	client := testpb.NewTestClient(rc)
	var err error
	for i := range 4 {
		if i == 0 {
			err = rc.Connect(respawntest.Context(t, 20*time.Second))
		} else {
			g := rc.Current()
			if _, err := client.Get(respawntest.Context(t, 20*time.Second), &testpb.GetRequest{}); err != nil {
				t.Fatalf("launch %d: Get: %v", i, err)
			}
			waitDone(t, g.Process().Done(), "the plugin exits after its call")
			_, err = redial.HandleOf(rc).Replace(respawntest.Context(t, time.Second), g, errors.New("exited"))
		}
		if i < 3 && err != nil {
			t.Fatalf("launch %d: %v", i+1, err)
		}
	}
	if !errors.Is(err, context.DeadlineExceeded) || status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("4th launch: got %v (%v), want the caller's DeadlineExceeded while it waits for a token", err, status.Code(err))
	}
	_ = rc.Close()
	if got := plugin.calls.Load(); got != 3 {
		t.Errorf("hook calls = %d, want 3 (the burst)", got)
	}
	if got := rc.Stats().BreakerOpens; got != 0 {
		t.Errorf("the breaker opened %d times for plugins that served", got)
	}
}

// TestHungStartsOpenTheBreaker: respawns that time out count towards the
// breaker even when each lasts longer than the window.
func TestHungStartsOpenTheBreaker(t *testing.T) {
	plugin := newPluginHook(t, "-hang-at-start")
	rec := &respawntest.Events{}
	rc := newConn(t, plugin.Respawner(),
		redial.WithPacing(redial.Pacing{RespawnTimeout: 300 * time.Millisecond}),
		redial.WithPacing(redial.Pacing{CrashLoopLaunches: 3, CrashLoopWindow: 100 * time.Millisecond, CrashLoopCoolDown: time.Hour}),
		redial.WithPacing(redial.Pacing{BackOff: func() backoff.BackOff { return &backoff.ZeroBackOff{} }}),
		redial.WithEventHandler(rec.Add))
	for i := range 3 {
		err := rc.ConnectOnce(respawntest.Context(t, 20*time.Second))
		if !errors.Is(err, redial.ErrRespawnTimeout) {
			t.Fatalf("launch %d: got %v, want ErrRespawnTimeout", i+1, err)
		}
		if errors.Is(err, context.DeadlineExceeded) || status.Code(err) != codes.Unavailable {
			t.Errorf("launch %d: %v (code %v) reads as the caller's own deadline; want Unavailable", i+1, err, status.Code(err))
		}
	}
	cle := wantCrashLoop(t, rc, plugin)
	if cle.Launches != 3 || cle.Failed != 3 {
		t.Errorf("CrashLoopError counts %d launches, %d failed; want 3, 3", cle.Launches, cle.Failed)
	}
	wantContains(t, cle, "3 launches in a row failed", "timed out after 300ms")
	// Each hung plugin was killed when its launch was abandoned, and that
	// exit is reported too, however late the hook returned.
	e := rec.Wait(t, redial.EventExit, 0, 3)
	if e.Exit.Reason != "launch-abandoned" || e.Exit.Signal != syscall.SIGKILL {
		t.Errorf("exit of a hung start: %v, reason %v; want SIGKILL, %v", e.Exit, e.Exit.Reason, "launch-abandoned")
	}
}

// TestCallWithoutDeadlineWaitsBounded: a call whose ctx has no deadline
// gets an Unavailable error matching ErrNoPlugin after WithMaxWait, not a
// wait as long as the plugin hangs.
func TestCallWithoutDeadlineWaitsBounded(t *testing.T) {
	plugin := newPluginHook(t, "-hang-at-start")
	rc := newConn(t, plugin.Respawner(), redial.WithPacing(redial.Pacing{RespawnTimeout: time.Hour}), redial.WithPacing(redial.Pacing{MaxWait: 200 * time.Millisecond}))
	done := make(chan error, 1)
	go func() {
		_, err := testpb.NewTestClient(rc).Get(context.Background(), &testpb.GetRequest{})
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, redial.ErrNoPlugin) || status.Code(err) != codes.Unavailable {
			t.Errorf("got %v (%v), want ErrNoPlugin with Unavailable", err, status.Code(err))
		}
	case <-time.After(20 * time.Second):
		t.Fatal("a call without a deadline still waits for the hung plugin")
	}
}

// TestFirstLaunchDeadline: a caller whose deadline ends during the first
// launch gets a DeadlineExceeded status, which also matches
// context.DeadlineExceeded, not a bare context error (code Unknown).
func TestFirstLaunchDeadline(t *testing.T) {
	plugin := newPluginHook(t, "-start-delay", "2s")
	rc := newConn(t, plugin.Respawner())
	_, err := testpb.NewTestClient(rc).Get(respawntest.Context(t, 100*time.Millisecond), &testpb.GetRequest{})
	if status.Code(err) != codes.DeadlineExceeded || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v (code %v), want DeadlineExceeded", err, status.Code(err))
	}
}

// TestHalfOpenTriesAtOnce: after the cool-down the one launch let through
// does not wait for the backoff of the failures before (here an hour).
func TestHalfOpenTriesAtOnce(t *testing.T) {
	clock := &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	rc, plugin, _ := crashLoop(t, redial.WithClock(clock.Now), redial.WithPacing(redial.Pacing{CrashLoopLaunches: 1, CrashLoopWindow: time.Minute, CrashLoopCoolDown: time.Hour}),
		redial.WithPacing(redial.Pacing{BackOff: func() backoff.BackOff { return backoff.NewConstantBackOff(time.Hour) }}))
	failLaunches(t, rc, plugin, 1)
	wantCrashLoop(t, rc, plugin)
	clock.Advance(time.Hour)
	plugin.set()
	if err := rc.Connect(respawntest.Context(t, 10*time.Second)); err != nil {
		t.Fatalf("half-open launch: %v (did it wait for the backoff?)", err)
	}
}

// TestFinalExitCodes: an exit code the host declared final stops
// respawning, at start or after serving, with a typed error carrying the
// exit.
func TestFinalExitCodes(t *testing.T) {
	t.Run("at start", func(t *testing.T) {
		plugin := newPluginHook(t, "-exit-code", "78")
		rc := newConn(t, plugin.Respawner(), redial.WithPacing(redial.Pacing{FinalExitCodes: []int{78}}))
		for range 2 {
			err := rc.Connect(respawntest.Context(t, 20*time.Second))
			var fe *redial.FinalExitError
			if !errors.As(err, &fe) || !errors.Is(err, redial.ErrPermanent) {
				t.Fatalf("got %v, want a *FinalExitError", err)
			}
			if fe.Exit.Code != 78 || status.Code(err) != codes.FailedPrecondition {
				t.Errorf("exit %v, code %v; want exit code 78, FailedPrecondition", fe.Exit, status.Code(err))
			}
			wantContains(t, err, "exiting with code 78")
		}
		if got := plugin.calls.Load(); got != 1 {
			t.Errorf("hook calls = %d, want 1", got)
		}
		plugin.set()
		rc.Reset()
		if err := rc.Connect(respawntest.Context(t, 20*time.Second)); err != nil {
			t.Fatalf("Connect after Reset: %v", err)
		}
	})
	t.Run("after serving", func(t *testing.T) {
		plugin := newPluginHook(t, "-die-after-calls", "1")
		rc := newConn(t, plugin.Respawner(), redial.WithPacing(redial.Pacing{FinalExitCodes: []int{5}}))
		if _, err := testpb.NewTestClient(rc).Get(respawntest.Context(t, 20*time.Second), &testpb.GetRequest{}); err != nil {
			t.Fatal(err)
		}
		g := rc.Current()
		waitDone(t, g.Process().Done(), "the plugin exits with 5")
		_, err := redial.HandleOf(rc).Replace(respawntest.Context(t, 20*time.Second), g, errors.New("exited"))
		var fe *redial.FinalExitError
		if !errors.As(err, &fe) || fe.Exit.Code != 5 {
			t.Fatalf("Replace: got %v, want a *FinalExitError with code 5", err)
		}
		if got := plugin.calls.Load(); got != 1 {
			t.Errorf("hook calls = %d, want 1 (the exit stopped launches)", got)
		}
	})
}

// TestExitReasons: an exit redial caused is not reported as a crash, an
// outside SIGKILL is, and failed launches are reported too. It holds
// whether the next launch is started by the exit itself or by the test.
func TestExitReasons(t *testing.T) {
	plugin := newPluginHook(t)
	rec := &respawntest.Events{}
	rc, g1 := connected(t, plugin, redial.WithPacing(redial.Pacing{GracePeriod: -1}), redial.WithEventHandler(rec.Add))
	exitOf := func(gen uint64, reason redial.ExitReason) redial.Event {
		t.Helper()
		e, _ := rec.Log.Wait(t, 0, fmt.Sprintf("exit of generation %d, %v", gen, reason), func(e redial.Event) bool {
			return e.Kind == redial.EventExit && e.Generation == gen && e.Exit.Reason == reason
		})
		return e
	}
	g2, err := redial.HandleOf(rc).Replace(respawntest.Context(t, 20*time.Second), g1, errors.New("rotate"))
	if err != nil {
		t.Fatal(err)
	}
	// A live plugin is stopped gracefully (SIGTERM, exit code 0); the
	// reason says redial stopped it, so it reads as no crash either way.
	e := exitOf(1, "retired")
	wantContains(t, errors.New(string(e.Exit.Reason)), "retired")

	plugin.set("-exit-at-start")
	respawntest.Kill(t, g2)
	exitOf(2, "crashed")
	if _, err = redial.HandleOf(rc).Replace(respawntest.Context(t, 20*time.Second), g2, errors.New("killed")); err == nil {
		t.Fatal("launch of a plugin that exits at start succeeded")
	}
	if e := exitOf(3, "crashed"); e.Exit.Code != 3 {
		t.Errorf("failed launch's exit: %v; want code 3", e.Exit)
	}

	plugin.set()
	rc.Reset()
	g3, err := redial.HandleOf(rc).Replace(respawntest.Context(t, 20*time.Second), g2, errors.New("killed"))
	if err != nil {
		t.Fatal(err)
	}
	_ = rc.Close()
	exitOf(g3.Number(), "closed")
	if s := rc.Stats(); s.Exits < 4 || s.Crashes != s.Exits-2 {
		t.Errorf("Stats() counts %d exits, %d crashes; want 4 or more, all but the retired and the closed one", s.Exits, s.Crashes)
	}
}
