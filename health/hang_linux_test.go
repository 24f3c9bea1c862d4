package health_test

import (
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/grpc-respawn/respawn/health"
	"github.com/grpc-respawn/respawn/redial"
)

// A deadlocked plugin (its handlers blocked, its transport alive) shows
// no sign of life while its checks go unanswered: it is found hung by
// Config.Failures silent rounds in a row, not taken for a busy plugin
// until the limit for those (10 × Failures rounds). Its checks do not
// wake it: no deadline is sent with them, and none is cancelled before
// the plugin is judged.
func TestDeadlockedPluginIsHungBySilentChecks(t *testing.T) {
	const failures = 3
	h := newHost(t, []string{"-hung-health"}, nil, health.Config{
		Interval: 20 * time.Millisecond,
		Timeout:  50 * time.Millisecond,
		Failures: failures,
	})
	g := h.rc.Current()
	hung := h.events.Wait(t, redial.EventHung, g.Number(), 1)
	if !errors.Is(hung.Err, health.ErrHung) {
		t.Errorf("hung event cause = %v, want health.ErrHung", hung.Err)
	}
	h.stop()
	var rounds, busy int
	for _, c := range h.checks.All() {
		if c.Generation != g.Number() {
			continue
		}
		rounds = max(rounds, c.Failures)
		if c.Busy {
			busy++
		}
	}
	if rounds >= 10*failures {
		t.Errorf("hung after %d failed rounds, %d of them taken for a busy plugin: want %d silent ones in a row, before the busy limit", rounds, busy, failures)
	}
}

// An idle, healthy plugin of a host whose own goroutines keep every P
// busy (32 CPU-bound goroutines per P) answers each check at once; the
// host reads the answers late. It is not killed: a check the host was
// too late to read is no evidence against the plugin.
func TestBusyHostKeepsAnIdlePlugin(t *testing.T) {
	if testing.Short() {
		t.Skip("keeps the host's CPUs busy for seconds")
	}
	h := newHost(t, nil, nil, health.Config{
		Interval: 50 * time.Millisecond,
		Timeout:  50 * time.Millisecond,
		Failures: 3,
	})
	g := h.rc.Current()
	stopSpinning := spin(t, 32*runtime.GOMAXPROCS(0))
	// 4 × Failures rounds, answered or not: each is logged.
	seen := 0
	h.checks.Wait(t, 0, "12 checks", func(health.Check) bool { seen++; return seen == 12 })
	stopSpinning()
	h.stop()
	var unanswered int
	for _, c := range h.checks.All() {
		if !c.Alive {
			unanswered++
		}
	}
	t.Logf("%d checks, %d unanswered", len(h.checks.All()), unanswered)
	if n := h.events.Count(redial.EventHung, g.Number()); n != 0 {
		t.Errorf("%d hung events for an idle plugin of a busy host, want 0", n)
	}
}

// spin starts n goroutines that spin on a CPU until the returned func is
// called, which waits for them to end, or the test ends.
func spin(t testing.TB, n int) (stop func()) {
	var done atomic.Bool
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !done.Load() {
			}
		}()
	}
	stop = sync.OnceFunc(func() {
		done.Store(true)
		wg.Wait()
	})
	t.Cleanup(stop)
	return stop
}
