package redial

import (
	"cmp"
	"context"
	"sync"
	"time"
)

// Spare launches are CPU-bound (a plugin's start-up) and never urgent: a
// spare only has to be ready by the next death. A recovery, on the other
// hand, is: when many plugins die at once (the OOM kill of a pod), every
// spare launched while others still recover competes with them for the
// cores. So spare launches wait until no respawn of any Conn in the
// process has run for quietPeriod, and at most maxDefer.
const (
	quietPeriod = 20 * time.Millisecond
	maxDefer    = time.Second
)

// recoveries counts the respawns in progress in the process; its zero
// value is ready to use and it is safe for concurrent use.
//
// The waiters share one signal, calm, closed once quietPeriod has passed
// with no respawn, by one timer armed when the last respawn ends: a
// respawn's end wakes none of them, however many wait (a mass kill leaves
// one retirement and one spare launch waiting per Conn), so that they take
// no CPU from the recoveries they wait behind.
type recoveries struct {
	mu     sync.Mutex
	active int
	calm   chan struct{} // closed while calm; nil until a respawn or a wait needs it
	timer  *time.Timer   // closes calm quietPeriod after the last end
	ends   uint64        // respawns ended: a timer armed before a later begin does not close calm
	period time.Duration // how long calm waits for after the last end; 0: quietPeriod (a test lengthens it)
}

// inProcess are the respawns of all Conns.
var inProcess recoveries

// begin records a respawn starting; its end must be recorded with end.
func (r *recoveries) begin() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.active++
	if r.timer != nil {
		r.timer.Stop()
	}
	if r.calm == nil || isClosed(r.calm) {
		r.calm = make(chan struct{})
	}
}

// end records a respawn ending.
func (r *recoveries) end() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.active--
	r.ends++
	if r.active > 0 {
		return
	}
	n, calm := r.ends, r.calm
	r.timer = time.AfterFunc(cmp.Or(r.period, quietPeriod), func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.active == 0 && r.ends == n && !isClosed(calm) {
			close(calm)
		}
	})
}

// quiet returns the channel closed once no respawn has run for
// quietPeriod: closed already if none runs nor ended within it.
func (r *recoveries) quiet() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.calm == nil { // no respawn ran yet: calm
		r.calm = make(chan struct{})
		close(r.calm)
	}
	return r.calm
}

// wait returns once no respawn has been in progress for quietPeriod, once
// maxDefer has passed, or when ctx ends.
func (r *recoveries) wait(ctx context.Context) {
	calm := r.quiet()
	if isClosed(calm) {
		return
	}
	t := time.NewTimer(maxDefer)
	defer t.Stop()
	select {
	case <-calm:
	case <-t.C:
	case <-ctx.Done():
	}
}

// isClosed reports whether c is closed; c is only ever closed, never sent on.
func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// servedWait bounds how long a respawn counts as in progress once its
// plugin is current, while it has not served a call; a test lengthens it.
var servedWait = 100 * time.Millisecond

// untilServed keeps the respawn that made g current in progress until g
// has served its first call ([Conn.served]), or for servedWait if it
// serves none: a recovery is over once the calls retried on the new
// plugin are answered, not when the plugin is swapped in. Until then the
// spare launches and clean-ups of every Conn wait, so that when a whole
// pod's plugins die at once none competes for the cores with a retried
// call still on its way.
func untilServed(g *Generation) {
	g.recovering.Store(true)
	time.AfterFunc(servedWait, g.recovered)
}

// recovered ends the respawn that made g current, once.
func (g *Generation) recovered() {
	if g.recovering.CompareAndSwap(true, false) {
		inProcess.end()
	}
}
