package health_test

import (
	"errors"
	"os/exec"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/grpc-respawn/respawn/health"
	"github.com/grpc-respawn/respawn/internal/respawntest"
	"github.com/grpc-respawn/respawn/internal/testpb"
	"github.com/grpc-respawn/respawn/redial"
)

// A stopped process is hung at its first failed check, whatever
// Config.Failures says: the kernel's state T is evidence enough.
func TestStoppedPluginIsHungAtTheFirstFailedCheck(t *testing.T) {
	h := newHost(t, nil, nil, health.Config{
		Interval: 50 * time.Millisecond,
		Timeout:  100 * time.Millisecond,
		Failures: 1000, // 100s of failed checks before, were they counted
	})
	g := h.rc.Current()
	stop(t, g.Process().PID)
	hung := h.events.Wait(t, redial.EventHung, g.Number(), 1)
	if !errors.Is(hung.Err, health.ErrHung) {
		t.Errorf("hung event cause = %v, want health.ErrHung", hung.Err)
	}
	if done := h.events.Wait(t, redial.EventRespawnDone, g.Number()+1, 1); done.Err != nil {
		t.Errorf("respawn: %v", done.Err)
	}
	h.stop()
	for _, c := range h.checks.All() {
		if c.Generation == g.Number() && c.Failures > 1 {
			t.Errorf("check %+v: a stopped plugin failed more than one check", c)
		}
	}
}

// A plugin whose calls are slow and whose every health check takes 1.5s of
// CPU (longer than the 1s timeout), on a host whose every core is
// saturated by CPU hogs (4 per core, real processes), is never killed
// under health's defaults: its checks time out, more than Failures of them
// in a row, but its process runs.
func TestBusyPluginOnASaturatedHostIsNotKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("saturates the host's CPUs for 10s")
	}
	h := newHost(t, []string{"-busy-health", "1500ms"}, nil, health.Config{}) // health's defaults
	g := h.rc.Current()
	hog(t, 4*runtime.NumCPU())

	const callers, load = 8, 10 * time.Second
	ctx := respawntest.Context(t, load+20*time.Second)
	end := time.Now().Add(load)
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		calls  int
		failed []error
	)
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(end) {
				// A slow handler: 300ms of work per call.
				_, err := h.client.Get(ctx, &testpb.GetRequest{Key: "k", DelayMs: 300})
				mu.Lock()
				calls++
				if err != nil {
					failed = append(failed, err)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	h.stop()

	var checks, unanswered int
	var slowest time.Duration
	for _, c := range h.checks.All() {
		checks++
		if !c.Alive {
			unanswered++
		}
		slowest = max(slowest, c.Duration)
	}
	t.Logf("%d hogs, %d calls, %d checks: %d unanswered, slowest %v", 4*runtime.NumCPU(), calls, checks, unanswered, slowest)
	if unanswered <= 3 {
		t.Errorf("%d checks unanswered, want more than Failures (3): the rule for a busy plugin was not exercised", unanswered)
	}
	if n := h.events.Count(redial.EventHung, g.Number()); n != 0 {
		t.Errorf("%d hung events for a busy plugin, want 0", n)
	}
	if n := h.respawnsAsked(); n != 0 {
		t.Errorf("%d respawns of a busy plugin, want 0", n)
	}
	if len(failed) != 0 {
		t.Errorf("%d of %d calls failed, first: %v", len(failed), calls, failed[0])
	}
}

// hog starts n processes that spin on a CPU until the test ends.
func hog(t *testing.T, n int) {
	t.Helper()
	for range n {
		cmd := exec.Command("sh", "-c", "while :; do :; done")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		})
	}
}
