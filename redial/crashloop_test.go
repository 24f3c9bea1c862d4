//go:build unix

package redial_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grpc-respawn/respawn/internal/respawntest"
	"github.com/grpc-respawn/respawn/internal/testpb"
	"github.com/grpc-respawn/respawn/redial"
)

// fakeClock is a clock the test moves by hand.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// crashLoop returns a Conn whose plugin exits at start, with a breaker that
// opens after 3 launches and stays open for an hour of clock.
func crashLoop(t *testing.T, extra ...redial.Option) (*redial.Conn, *pluginHook, *respawntest.Events) {
	t.Helper()
	plugin := newPluginHook(t, "-exit-at-start")
	rec := &respawntest.Events{}
	opts := append([]redial.Option{
		redial.WithPacing(redial.Pacing{CrashLoopLaunches: 3, CrashLoopWindow: time.Minute, CrashLoopCoolDown: time.Hour}),
		redial.WithPacing(redial.Pacing{BackOff: func() backoff.BackOff { return backoff.NewConstantBackOff(10 * time.Millisecond) }}),
		redial.WithEventHandler(rec.Add),
	}, extra...)
	return newConn(t, plugin.Respawner(), opts...), plugin, rec
}

// wantEvents waits until rec holds n events that match, what names them
// (events are delivered asynchronously), and checks that it holds no more.
func wantEvents(t *testing.T, rec *respawntest.Events, what string, match func(redial.Event) bool, n int) {
	t.Helper()
	rec.WaitFor(t, what, match, n)
	if got := rec.CountFor(match); got != n {
		t.Errorf("%d events %s, want %d", got, what, n)
	}
}

// failLaunches calls Connect n times and checks that each launched the
// plugin and failed because it exited.
func failLaunches(t *testing.T, rc *redial.Conn, plugin *pluginHook, n int) {
	t.Helper()
	for range n {
		before := plugin.calls.Load()
		err := rc.ConnectOnce(respawntest.Context(t, 20*time.Second))
		if errors.Is(err, redial.ErrCrashLoop) || err == nil {
			t.Fatalf("Connect %d: got %v, want a failed launch", before+1, err)
		}
		wantContains(t, err, "exited with code 3")
		if got := plugin.calls.Load(); got != before+1 {
			t.Fatalf("hook calls = %d, want %d", got, before+1)
		}
	}
}

// wantCrashLoop calls Connect and checks that the breaker refused it
// without launching.
func wantCrashLoop(t *testing.T, rc *redial.Conn, plugin *pluginHook) *redial.CrashLoopError {
	t.Helper()
	before := plugin.calls.Load()
	err := rc.ConnectOnce(respawntest.Context(t, 20*time.Second))
	if !errors.Is(err, redial.ErrCrashLoop) {
		t.Fatalf("Connect: got %v, want ErrCrashLoop", err)
	}
	var cle *redial.CrashLoopError
	if !errors.As(err, &cle) {
		t.Fatalf("Connect: got %T, want a *CrashLoopError", err)
	}
	if got := status.Code(err); got != codes.Unavailable {
		t.Errorf("code = %v, want Unavailable", got)
	}
	if got := plugin.calls.Load(); got != before {
		t.Errorf("the open breaker launched the plugin: hook calls %d, want %d", got, before)
	}
	return cle
}

func TestCrashLoop(t *testing.T) {
	rc, plugin, rec := crashLoop(t)
	failLaunches(t, rc, plugin, 3)

	cle := wantCrashLoop(t, rc, plugin)
	if cle.Launches != 3 {
		t.Errorf("Launches = %d, want 3", cle.Launches)
	}
	if cle.Last == nil || errors.Unwrap(cle) != cle.Last {
		t.Fatalf("Last = %v, Unwrap = %v, want the last launch's error for both", cle.Last, errors.Unwrap(cle))
	}
	wantContains(t, cle.Last, "exited before printing its address", "exited with code 3")
	if !cle.Until.After(time.Now().Add(59 * time.Minute)) {
		t.Errorf("Until = %v, want about an hour from now", cle.Until)
	}
	for range 3 {
		wantCrashLoop(t, rc, plugin)
	}
	wantEvents(t, rec, "respawn-start", respawntest.OfKind(redial.EventRespawnStart), 3)
	wantEvents(t, rec, "breaker opened", respawntest.BreakerOpened, 1)
	if got := rc.Stats().BreakerOpens; got != 1 {
		t.Errorf("Stats().BreakerOpens = %d, want 1", got)
	}

	plugin.set() // the plugin is fixed
	wantCrashLoop(t, rc, plugin)
	rc.Reset()
	wantEvents(t, rec, "breaker closed", respawntest.BreakerClosed, 1)
	if err := rc.ConnectOnce(respawntest.Context(t, 20*time.Second)); err != nil {
		t.Fatalf("Connect after Reset: %v", err)
	}
	if got := plugin.calls.Load(); got != 4 {
		t.Errorf("hook calls = %d, want 4", got)
	}
	if _, err := testpb.NewTestClient(rc).Get(respawntest.Context(t, 10*time.Second), &testpb.GetRequest{}); err != nil {
		t.Fatalf("Get: %v", err)
	}
}

func TestCrashLoopHalfOpen(t *testing.T) {
	clock := &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	rc, plugin, rec := crashLoop(t, redial.WithClock(clock.Now))
	failLaunches(t, rc, plugin, 3)
	cle := wantCrashLoop(t, rc, plugin)
	if want := clock.Now().Add(time.Hour); !cle.Until.Equal(want) {
		t.Errorf("Until = %v, want %v", cle.Until, want)
	}

	clock.Advance(time.Hour - time.Second)
	wantCrashLoop(t, rc, plugin)

	clock.Advance(time.Second)
	failLaunches(t, rc, plugin, 1) // half-open: one launch goes through
	cle = wantCrashLoop(t, rc, plugin)
	if cle.Launches != 3 {
		t.Errorf("Launches = %d, want 3", cle.Launches)
	}
	wantEvents(t, rec, "breaker opened", respawntest.BreakerOpened, 2)

	clock.Advance(time.Hour)
	plugin.set()
	if err := rc.ConnectOnce(respawntest.Context(t, 20*time.Second)); err != nil {
		t.Fatalf("Connect after the second cool-down: %v", err)
	}
	if got := plugin.calls.Load(); got != 5 {
		t.Errorf("hook calls = %d, want 5", got)
	}
	if _, err := testpb.NewTestClient(rc).Get(respawntest.Context(t, 20*time.Second), &testpb.GetRequest{}); err != nil {
		t.Fatal(err)
	}
	wantEvents(t, rec, "breaker closed", respawntest.BreakerClosed, 1)
}

// TestKillsOfServingPluginsAreNotACrashLoop: a plugin that serves calls
// between deaths never trips the breaker, even without a Policy: the Conn
// itself records the calls served.
func TestKillsOfServingPluginsAreNotACrashLoop(t *testing.T) {
	rc := newConn(t, newPluginHook(t).Respawner(), redial.WithPacing(redial.Pacing{CrashLoopLaunches: 2, CrashLoopWindow: time.Hour, CrashLoopCoolDown: time.Hour}))
	client := testpb.NewTestClient(rc)
	for i := range 4 {
		if _, err := client.Get(respawntest.Context(t, 20*time.Second), &testpb.GetRequest{}); err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
		g := rc.Current()
		respawntest.Kill(t, g)
		if _, err := redial.HandleOf(rc).Replace(respawntest.Context(t, 20*time.Second), g, errors.New("killed")); err != nil {
			t.Fatalf("round %d: Replace: %v", i, err)
		}
	}
	if got := rc.Stats().BreakerOpens; got != 0 {
		t.Errorf("breaker opened %d times", got)
	}
}

// The event handler runs without the Conn's lock, so it may call back into
// the Conn, even when the event is the breaker opening.
func TestEventHandlerMayCallConn(t *testing.T) {
	var rc *redial.Conn // set before the first event
	reset := make(chan struct{})
	handler := func(e redial.Event) {
		if respawntest.BreakerOpened(e) {
			rc.Reset()
			close(reset)
		}
	}
	rc, plugin, _ := crashLoop(t, redial.WithEventHandler(handler))
	failLaunches(t, rc, plugin, 3)
	done := make(chan error, 1)
	go func() { done <- rc.ConnectOnce(respawntest.Context(t, 20*time.Second)) }()
	select {
	case err := <-done:
		if !errors.Is(err, redial.ErrCrashLoop) {
			t.Errorf("Connect: got %v, want ErrCrashLoop", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Connect deadlocked: the handler was called with the Conn locked")
	}
	// The handler closed the breaker again.
	waitDone(t, reset, "the handler's Reset")
	failLaunches(t, rc, plugin, 1)
}

// TestCrashLoopAfterAPluginThatDiedServing: a plugin that is marked served
// once its successors have begun failing (a call it took as it died is
// judged late) cannot reset the breaker: it opens after the documented 5
// launches, that plugin's and its 4 failed successors'.
func TestCrashLoopAfterAPluginThatDiedServing(t *testing.T) {
	plugin := newPluginHook(t)
	events := &respawntest.Events{}
	var h redial.Handle
	rc := newConn(t, plugin.Respawner(), respawntest.WithHandle(nil, &h), redial.WithEventHandler(events.Add),
		redial.WithPacing(redial.Pacing{BackOff: func() backoff.BackOff { return backoff.NewConstantBackOff(time.Millisecond) }}))
	if err := rc.ConnectOnce(respawntest.Context(t, 20*time.Second)); err != nil {
		t.Fatal(err)
	}
	plugin.set("-exit-at-start")
	g := rc.Current()
	respawntest.Kill(t, g)
	events.Log.Wait(t, 0, "the first failed respawn", func(e redial.Event) bool {
		return e.Kind == redial.EventRespawnDone && e.Generation == 2 && e.Err != nil
	})
	g.MarkServed() // what the policy does for a call the plugin's death cut

	var cle *redial.CrashLoopError
	for range 10 {
		_, err := redial.HandleOf(rc).Replace(respawntest.Context(t, 20*time.Second), g, errors.New("plugin 1 is dead"))
		if errors.As(err, &cle) {
			break
		}
		wantContains(t, err, "exited with code 3")
	}
	if cle == nil {
		t.Fatalf("the breaker never opened: %d launches", plugin.calls.Load())
	}
	if got := plugin.calls.Load(); got != 5 {
		t.Errorf("launches before the breaker opened: %d, want 5", got)
	}
	if cle.Launches != 5 || cle.Failed != 4 {
		t.Errorf("CrashLoopError counts %d launches, %d failed; want 5, 4 (%v)", cle.Launches, cle.Failed, cle)
	}
}
