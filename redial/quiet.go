package redial

import (
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
type recoveries struct {
	mu     sync.Mutex
	active int
	last   time.Time     // when the last one began or ended
	quiet  chan struct{} // closed when active drops to 0, then replaced
}

// inProcess are the respawns of all Conns.
var inProcess recoveries

// begin records a respawn starting; its end must be recorded with end.
func (r *recoveries) begin() {
	r.mu.Lock()
	r.active++
	r.last = time.Now()
	r.mu.Unlock()
}

// end records a respawn ending.
func (r *recoveries) end() {
	r.mu.Lock()
	r.active--
	r.last = time.Now()
	if r.active == 0 && r.quiet != nil {
		close(r.quiet)
		r.quiet = nil
	}
	r.mu.Unlock()
}

// untilQuiet says how long a spare launch asked at now must still wait,
// given that it waits until limit at most, and whether a respawn is in
// progress (whose end may shorten the wait). r.mu is held.
func (r *recoveries) untilQuiet(now, limit time.Time) (time.Duration, bool) {
	left := limit.Sub(now)
	if r.active > 0 {
		return max(left, 0), true
	}
	return max(min(quietPeriod-now.Sub(r.last), left), 0), false
}

// wait returns once no respawn has been in progress for quietPeriod, once
// maxDefer has passed, or when ctx ends.
func (r *recoveries) wait(ctx context.Context) {
	limit := time.Now().Add(maxDefer)
	var t *time.Timer
	defer func() {
		if t != nil {
			t.Stop()
		}
	}()
	for {
		r.mu.Lock()
		now := time.Now()
		d, busy := r.untilQuiet(now, limit)
		var wake <-chan struct{}
		if busy {
			if r.quiet == nil {
				r.quiet = make(chan struct{})
			}
			wake = r.quiet
		}
		r.mu.Unlock()
		if d <= 0 {
			return
		}
		if t == nil {
			t = time.NewTimer(d)
		} else {
			t.Reset(d)
		}
		select {
		case <-wake:
		case <-t.C:
		case <-ctx.Done():
			return
		}
	}
}
