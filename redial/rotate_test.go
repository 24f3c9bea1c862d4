//go:build unix

package redial_test

import (
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/grpc-respawn/respawn/interceptor"
	"github.com/grpc-respawn/respawn/internal/plugintest"
	"github.com/grpc-respawn/respawn/internal/respawntest"
	"github.com/grpc-respawn/respawn/internal/testpb"
	"github.com/grpc-respawn/respawn/redial"
)

// TestRotateUnderLoad rotates the plugin 5 times under 16 callers of
// Append, a call that is not idempotent, some of them longer than the
// grace period: no call fails, every acknowledged Append ran exactly once
// (the journal says), no Append ran without being acknowledged, and the
// retired plugins exit as retired, not crashed.
func TestRotateUnderLoad(t *testing.T) {
	const (
		callers   = 16
		rotations = 5
		grace     = 100 * time.Millisecond
	)
	journal := filepath.Join(t.TempDir(), "journal")
	plugin := newPluginHook(t, "-journal", journal)
	rec := &respawntest.Events{}
	rc, _ := connected(t, plugin, redial.WithPolicy(interceptor.New()),
		redial.WithPacing(redial.Pacing{GracePeriod: grace}), redial.WithEventHandler(rec.Add))
	client := testpb.NewTestClient(rc)
	ctx := respawntest.Context(t, 60*time.Second)

	var (
		stop   atomic.Bool
		wg     sync.WaitGroup
		mu     sync.Mutex
		acked  = make(map[string]bool)
		failed []error
		pids   = make(map[int64]bool)
		acks   = make(chan int64, 4096) // the pid that answered
	)
	for i := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; !stop.Load(); n++ {
				id := fmt.Sprintf("c%d-%d", i, n)
				delay := int64(n % 5) // ms
				if i == 0 && n%4 == 0 {
					delay = 300 // outlives the grace period
				}
				resp, err := client.Append(ctx, &testpb.AppendRequest{Id: id, DelayMs: delay})
				mu.Lock()
				if err != nil {
					failed = append(failed, fmt.Errorf("Append %s: %w", id, err))
				} else {
					acked[id] = true
					pids[resp.GetPid()] = true
				}
				mu.Unlock()
				if err == nil {
					select {
					case acks <- resp.GetPid():
					default:
					}
				}
			}
		}()
	}
	// waitAcks waits for n calls answered by the current plugin: acks of
	// the plugin a Rotate retired (buffered, or in flight through its
	// grace) do not count, or the next Rotate could retire a plugin that
	// never served.
	waitAcks := func(n int) {
		t.Helper()
		pid := int64(rc.Current().Process().PID)
		for n > 0 {
			select {
			case p := <-acks:
				if p == pid {
					n--
				}
			case <-ctx.Done():
				t.Fatalf("callers stalled: %v", ctx.Err())
			}
		}
	}
	for r := range rotations {
		waitAcks(64)
		if err := rc.Rotate(ctx); err != nil {
			t.Errorf("Rotate %d: %v", r+1, err)
		}
	}
	waitAcks(64)
	stop.Store(true)
	wg.Wait()

	if len(failed) > 0 {
		t.Errorf("%d calls failed, want 0; first: %v", len(failed), failed[0])
	}
	if got, want := rc.Current().Number(), uint64(1+rotations); got != want {
		t.Errorf("current generation %d, want %d", got, want)
	}
	if got := rc.Stats().Rotations; got != rotations {
		t.Errorf("Stats.Rotations = %d, want %d", got, rotations)
	}
	if len(pids) < rotations+1 {
		t.Errorf("calls answered by %d pids, want at least %d (every plugin served)", len(pids), rotations+1)
	}
	j, err := plugintest.ReadJournal(journal)
	if err != nil {
		t.Fatal(err)
	}
	for id := range acked {
		if j[id] != 1 {
			t.Errorf("acknowledged Append %s ran %d times, want exactly once", id, j[id])
		}
	}
	for id, n := range j {
		if !acked[id] {
			t.Errorf("Append %s ran %d times but was never acknowledged", id, n)
		}
	}
	for gen := uint64(1); gen <= rotations; gen++ {
		e := rec.Wait(t, redial.EventExit, gen, 1)
		if e.Exit.Reason != "retired" {
			t.Errorf("generation %d exit: %v, want reason retired", gen, e.Exit)
		}
	}
	if got := rc.Stats().Crashes; got != 0 {
		t.Errorf("Stats.Crashes = %d, want 0", got)
	}
	t.Logf("%d calls acknowledged over %d rotations, answered by %d pids", len(acked), rotations, len(pids))
}

// TestRotateFailedLaunchKeepsPlugin: when the new plugin cannot start,
// Rotate returns the launch's error and the old plugin stays current and
// serving.
func TestRotateFailedLaunchKeepsPlugin(t *testing.T) {
	plugin := newPluginHook(t)
	rc, g1 := connected(t, plugin)
	plugin.set("-exit-at-start")
	err := rc.Rotate(respawntest.Context(t, 20*time.Second))
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 {
		t.Fatalf("Rotate to a plugin that exits at start: %v, want an *exec.ExitError with code 3", err)
	}
	if rc.Current() != g1 {
		t.Fatalf("current generation %d, want the old plugin (1) kept", rc.Current().Number())
	}
	resp, err := testpb.NewTestClient(rc).Get(respawntest.Context(t, 10*time.Second), &testpb.GetRequest{})
	if err != nil || resp.GetPid() != int64(g1.Process().PID) {
		t.Fatalf("Get after the failed rotation: %v, pid %d; want served by the old plugin %d", err, resp.GetPid(), g1.Process().PID)
	}
}

// TestRotateBreakerOpen: while the crash-loop breaker is open, Rotate
// launches nothing and says why.
func TestRotateBreakerOpen(t *testing.T) {
	plugin := newPluginHook(t)
	rc := newConn(t, plugin.Respawner(), redial.WithPacing(redial.Pacing{CrashLoopLaunches: 1, CrashLoopWindow: time.Minute, CrashLoopCoolDown: time.Hour}))
	ctx := respawntest.Context(t, 20*time.Second)
	if err := rc.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	g1 := rc.Current() // serves nothing: the next respawn opens the breaker
	respawntest.Kill(t, g1)
	if _, err := redial.HandleOf(rc).Replace(ctx, g1, errors.New("died")); !errors.Is(err, redial.ErrCrashLoop) {
		t.Fatalf("Replace: %v, want the breaker open", err)
	}
	calls := plugin.calls.Load()
	if err := rc.Rotate(ctx); !errors.Is(err, redial.ErrCrashLoop) {
		t.Fatalf("Rotate with the breaker open: %v, want ErrCrashLoop", err)
	}
	if got := plugin.calls.Load(); got != calls {
		t.Errorf("hook called %d times by Rotate, want 0", got-calls)
	}
}

// TestRotateRacingClose: a Rotate racing Close returns nil or ErrClosed,
// and every plugin launched is stopped (goleak and the reaped pids check
// the rest).
func TestRotateRacingClose(t *testing.T) {
	plugin := newPluginHook(t, "-start-delay", "50ms")
	for range 3 {
		rc, err := redial.New(plugin.Respawner())
		if err != nil {
			t.Fatal(err)
		}
		ctx := respawntest.Context(t, 20*time.Second)
		if err := rc.Connect(ctx); err != nil {
			t.Fatal(err)
		}
		g1 := rc.Current()
		done := make(chan error, 1)
		go func() { done <- rc.Rotate(ctx) }()
		if err := rc.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		if err := <-done; err != nil && !errors.Is(err, redial.ErrClosed) {
			t.Errorf("Rotate racing Close: %v, want nil or ErrClosed", err)
		}
		if err := rc.Rotate(ctx); !errors.Is(err, redial.ErrClosed) {
			t.Errorf("Rotate after Close: %v, want ErrClosed", err)
		}
		assertReaped(t, g1.Process().PID)
		if g := rc.Current(); g != g1 && g != nil {
			assertReaped(t, g.Process().PID)
		}
	}
}
