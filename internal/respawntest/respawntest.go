// Package respawntest holds the test helpers that the tests of
// [github.com/grpc-respawn/respawn/redial], its go-plugin hook, the
// interceptor and health packages share: a bounded test context, a SIGKILL
// that waits for the reaping, and logs of values and of a [redial.Conn]'s
// events that a test can wait on.
//
// It imports redial, so only external test packages (package redial_test,
// not package redial) can use it.
package respawntest

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/grpc-respawn/respawn/redial"
)

// Timeout bounds how long [Kill] and [Events.Wait] wait before they fail the
// test: long enough for a respawn under -race on a loaded machine, short
// enough that a bug shows up as a failure rather than a hung test binary.
const Timeout = 20 * time.Second

// Context returns a context that ends after d, or when tb's cleanups run,
// whichever comes first. Every test ctx has a deadline: a call that hangs
// fails the test instead of hanging the binary.
func Context(tb testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	tb.Cleanup(cancel)
	return ctx
}

// Kill SIGKILLs g's plugin process, as the OOM killer would, and waits until
// it is reaped. It fails tb if the signal cannot be sent or the process is
// not reaped within [Timeout]. Like any helper that fails tb, it must be
// called from the test's goroutine.
func Kill(tb testing.TB, g *redial.Generation) {
	tb.Helper()
	p := g.Process()
	if err := killPID(p.PID); err != nil {
		tb.Fatalf("SIGKILL plugin %d (pid %d): %v", g.Number(), p.PID, err)
	}
	timer := time.NewTimer(Timeout)
	defer timer.Stop()
	select {
	case <-p.Done():
	case <-timer.C:
		tb.Fatalf("plugin %d (pid %d) not reaped within %v of SIGKILL", g.Number(), p.PID, Timeout)
	}
}

// Log records values that other goroutines report, for a test to inspect
// or wait for. A zero Log is ready to use. It is safe for concurrent use.
type Log[T any] struct {
	mu      sync.Mutex
	items   []T
	changed chan struct{} // closed and replaced by the next Add; nil while no one waits
}

// Add records v and wakes any [Log.Wait].
func (l *Log[T]) Add(v T) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.items = append(l.items, v)
	if l.changed != nil {
		close(l.changed)
		l.changed = nil
	}
}

// All returns a copy of the values recorded so far, oldest first.
func (l *Log[T]) All() []T {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]T(nil), l.items...)
}

// Wait returns the first value at index from or later that matches, and its
// index. It fails tb, naming what it waited for, after [Timeout]. It sleeps
// on a channel that the next [Log.Add] closes, so it wakes once per value
// and never polls. Call it from the test's goroutine.
func (l *Log[T]) Wait(tb testing.TB, from int, what string, match func(T) bool) (T, int) {
	tb.Helper()
	timer := time.NewTimer(Timeout)
	defer timer.Stop()
	for {
		l.mu.Lock()
		for i := from; i < len(l.items); i++ {
			if match(l.items[i]) {
				v := l.items[i]
				l.mu.Unlock()
				return v, i
			}
		}
		from = max(from, len(l.items))
		if l.changed == nil {
			l.changed = make(chan struct{})
		}
		changed := l.changed
		l.mu.Unlock()
		select {
		case <-changed:
		case <-timer.C:
			tb.Fatalf("no %s within %v", what, Timeout)
			var zero T
			return zero, -1
		}
	}
}

// Events records the events a [redial.Conn] reports, for a test to count,
// inspect or wait for. Pass its Add method to [redial.WithEventHandler].
// A zero Events is ready to use. It is safe for concurrent use.
type Events struct {
	Log[redial.Event]
}

// matching returns a matcher of events of kind k and, unless gen is 0, of
// generation gen.
func matching(k redial.EventKind, gen uint64) func(redial.Event) bool {
	return func(e redial.Event) bool { return e.Kind == k && (gen == 0 || e.Generation == gen) }
}

// Count returns how many events of kind k have been recorded; with a gen
// other than 0, only those of generation gen.
func (r *Events) Count(k redial.EventKind, gen uint64) int {
	return r.CountFor(matching(k, gen))
}

// Find returns the first recorded event of kind k (and generation gen,
// unless gen is 0), and whether there is one.
func (r *Events) Find(k redial.EventKind, gen uint64) (redial.Event, bool) {
	match := matching(k, gen)
	for _, e := range r.All() {
		if match(e) {
			return e, true
		}
	}
	return redial.Event{}, false
}

// Wait waits until n events of kind k (and generation gen, unless gen is 0)
// have been recorded, and returns the n-th. It fails tb after [Timeout].
func (r *Events) Wait(tb testing.TB, k redial.EventKind, gen uint64, n int) redial.Event {
	tb.Helper()
	return r.WaitFor(tb, fmt.Sprintf("%v of generation %d (0: any)", k, gen), matching(k, gen), n)
}

// WaitFor waits until n recorded events match, and returns the n-th; what
// names them in the failure. It fails tb after [Timeout].
func (r *Events) WaitFor(tb testing.TB, what string, match func(redial.Event) bool, n int) redial.Event {
	tb.Helper()
	if n < 1 {
		tb.Fatalf("Events.WaitFor: n = %d, want at least 1", n)
	}
	var e redial.Event
	for i, from := 0, 0; i < n; i++ {
		e, from = r.Log.Wait(tb, from, fmt.Sprintf("%d events: %s", n, what), match)
		from++
	}
	return e
}

// WaitCurrent waits until plugin n or a later one is rc's current plugin,
// as its successful respawns recorded in r show, and returns it. It fails
// tb after [Timeout].
func (r *Events) WaitCurrent(tb testing.TB, rc *redial.Conn, n uint64) *redial.Generation {
	tb.Helper()
	if g := rc.Current(); g != nil && g.Number() >= n {
		return g
	}
	r.Log.Wait(tb, 0, fmt.Sprintf("plugin %d or later", n), func(e redial.Event) bool {
		return e.Kind == redial.EventRespawnDone && e.Err == nil && e.Generation >= n
	})
	return rc.Current()
}

// CountFor returns how many recorded events match.
func (r *Events) CountFor(match func(redial.Event) bool) int {
	n := 0
	for _, e := range r.All() {
		if match(e) {
			n++
		}
	}
	return n
}

// Matchers of the outcomes that one kind of event tells apart by its
// fields, for [Events.WaitFor] and [Events.CountFor].
var (
	OfKind        = func(k redial.EventKind) func(redial.Event) bool { return matching(k, 0) }
	SpareReady    = func(e redial.Event) bool { return e.Kind == redial.EventStandby && e.Err == nil }
	SpareWasted   = func(e redial.Event) bool { return e.Kind == redial.EventStandby && e.Err != nil }
	SparePromoted = func(e redial.Event) bool { return e.Kind == redial.EventRespawnDone && e.Spare && e.Err == nil }
	Rotated       = func(e redial.Event) bool { return e.Kind == redial.EventRespawnDone && e.Planned && e.Err == nil }
	PlannedStart  = func(e redial.Event) bool { return e.Kind == redial.EventRespawnStart && e.Planned }
	BreakerOpened = func(e redial.Event) bool { return e.Kind == redial.EventBreaker && e.Err != nil }
	BreakerClosed = func(e redial.Event) bool { return e.Kind == redial.EventBreaker && e.Err == nil }
)

// OfGeneration narrows match to the events of generation gen.
func OfGeneration(gen uint64, match func(redial.Event) bool) func(redial.Event) bool {
	return func(e redial.Event) bool { return e.Generation == gen && match(e) }
}

// killPID SIGKILLs pid alone (on Windows: terminates it).
func killPID(pid int) error {
	p, err := os.FindProcess(pid)
	if err != nil {
		return err
	}
	defer p.Release()
	return p.Kill()
}

// WithHandle is redial.WithPolicy(p) that also keeps the Conn's Handle in
// *h, for tests that call a policy's interceptors by hand. A nil p installs
// no interceptors.
func WithHandle(p redial.Policy, h *redial.Handle) redial.Option {
	return redial.WithPolicy(StartFunc(func(hh redial.Handle) redial.Binding {
		*h = hh
		if p == nil {
			return redial.Binding{}
		}
		return p.Start(hh)
	}))
}

// PolicyFunc adapts a function that returns dial options to a
// redial.Policy that keeps no ledgers.
type PolicyFunc func(h redial.Handle) []grpc.DialOption

// Start returns f(h) as the Binding's DialOptions.
func (f PolicyFunc) Start(h redial.Handle) redial.Binding {
	return redial.Binding{DialOptions: f(h)}
}

// StartFunc adapts a function to a redial.Policy.
type StartFunc func(h redial.Handle) redial.Binding

// Start calls f(h).
func (f StartFunc) Start(h redial.Handle) redial.Binding { return f(h) }

// RespawnerFunc adapts a function to a redial.Respawner.
type RespawnerFunc func(ctx context.Context, req redial.Request) (redial.Backend, error)

// Respawn calls f(ctx, req).
func (f RespawnerFunc) Respawn(ctx context.Context, req redial.Request) (redial.Backend, error) {
	return f(ctx, req)
}
