package redial

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"syscall"
	"time"

	"github.com/cenkalti/backoff/v4"
	"google.golang.org/grpc/connectivity"

	"github.com/grpc-respawn/respawn/internal/probe"
	"github.com/grpc-respawn/respawn/redial/internal/proc"
)

// spare is a plugin launched ahead of need (Pacing.Spares): dialled and
// ready, not yet a generation.
type spare struct {
	b       Backend
	unwatch func() // ends its watcher, once promoted or discarded
	// check: promoted by a planned replacement, which has the time to ask
	// it whether it serves before it retires a healthy plugin.
	check bool
}

// maxSpareFailures is how many spare launches in a row may fail before
// spares are launched only once a plugin comes up again.
const maxSpareFailures = 5

// spareCheckTimeout bounds the health check of a spare promoted by a
// planned replacement ([Conn.Rotate], Pacing.Recycle).
const spareCheckTimeout = time.Second

// standby is the pool of spares. Guarded by Conn.mu.
type standby struct {
	ready     []*spare // oldest first
	launching int
	failed    bool // spare launches stopped after failures: none until a plugin comes up
	refill    bool // a spare was promoted: launch its successor soon
	failures  int  // spare launches failed in a row, while not stopped
	bo        backoff.BackOff
	retry     time.Duration // the backoff the next spare launch waits
	promoted  *Generation   // the last spare promoted, until it is replaced
	forgiven  *Generation   // the last spare whose death the breaker forgave
}

// refillDelay bounds how long the launch of a promoted spare's successor
// waits for the promoted plugin to serve its first call. A launch is
// CPU-bound; started at once, it competes with the calls being retried on
// the spare, on the critical path of the recovery.
const refillDelay = 20 * time.Millisecond

// unusable says why s cannot be promoted, nil if it can: its process has
// exited or is dying (a zombie, a SIGKILL pending: see [Process.Await]), or
// its connection failed. It makes no round trip to the plugin, and does
// not wait. died reports that the process is dead or dying by itself, not
// by redial's doing.
func (s *spare) unusable() (why error, died bool) {
	if p := s.b.Process; p != nil && p.Await(context.Background(), 0) {
		if err := exited(p); err != nil {
			return err, true
		}
		return fmt.Errorf("redial: spare pid %d found dying", p.PID), true
	}
	if st := s.b.Conn.GetState(); st == connectivity.TransientFailure || st == connectivity.Shutdown {
		return fmt.Errorf("redial: spare's connection is %v", st), false
	}
	return nil, false
}

// stopWatching ends the watcher of s, taken out of the pool.
func (s *spare) stopWatching() {
	if s.unwatch != nil {
		s.unwatch()
	}
}

// fillLocked launches spares until n are ready or launching, each paced by
// the rate bound; none while the breaker is open or launches are stopped.
// c.mu is held.
func (c *Conn) fillLocked() {
	st := &c.spares
	for !c.closed.Load() && !st.failed && len(st.ready)+st.launching < c.opts.standby {
		delay, err := c.pace.planned(c.opts, c.opts.now())
		if err != nil {
			return
		}
		delay, st.retry = max(delay, st.retry), 0
		st.launching++
		c.wg.Add(1)
		go c.launchSpare(delay)
	}
}

// refillLocked launches the successor of a spare just promoted once the
// new plugin has served a call (see Conn.served) or after refillDelay.
// c.mu is held.
func (c *Conn) refillLocked() {
	c.spares.refill = true
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		t := time.NewTimer(refillDelay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-c.ctx.Done():
			return
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.spares.refill {
			c.spares.refill = false
			c.fillLocked()
		}
	}()
}

// takeSpareLocked returns the oldest spare that can be promoted, nil if
// none; the dead ones it finds are discarded. c.mu is held.
func (c *Conn) takeSpareLocked() *spare {
	st := &c.spares
	for len(st.ready) > 0 {
		s := st.ready[0]
		st.ready = slices.Delete(st.ready, 0, 1)
		s.stopWatching()
		why, died := s.unusable()
		if why == nil {
			return s
		}
		c.discardUnusable(s, why, died)
	}
	if c.opts.standby > 0 {
		c.stats.missing.Add(1)
	}
	return nil
}

// discard stops s, a spare no longer wanted, in the background, and counts
// it wasted.
func (c *Conn) discard(s *spare, why error, reason proc.Reason) {
	e := Event{Kind: EventStandby, Err: why}
	if p := s.b.Process; p != nil {
		e.Exit, _ = p.Exit()
	}
	c.emit(e)
	c.stopLater(s.b, reason)
}

// discardUnusable discards s, which cannot be promoted for why: as crashed
// if its process died by itself, else as abandoned. c.mu is held.
func (c *Conn) discardUnusable(s *spare, why error, died bool) {
	reason := proc.Abandoned
	if died {
		reason = proc.Crashed
	}
	c.discard(s, why, reason)
}

// stopLater stops b, a spare, on a goroutine of its own, so that c.mu
// need not be released for it.
func (c *Conn) stopLater(b Backend, reason proc.Reason) {
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		_ = c.stopBackend(0, b, reason)
	}()
}

// launchSpare launches one spare after delay and adds it to the pool.
func (c *Conn) launchSpare(delay time.Duration) {
	defer c.wg.Done()
	if delay > 0 {
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-c.ctx.Done():
		}
		t.Stop()
	}
	inProcess.wait(c.ctx) // behind any recovery, this Conn's or another's
	var b Backend
	err := ErrClosed
	if c.ctx.Err() == nil {
		b, err = c.launchBackend(Request{Spare: true, DialOptions: c.opts.hookDialOptions(c.calls)}, true)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.spares.launching--
	switch {
	case c.closed.Load():
		if err == nil {
			c.stopLater(b, proc.Closed)
		}
	case err != nil:
		c.emit(Event{Kind: EventStandby, Err: fmt.Errorf("redial: spare launch: %w", err)})
		c.spareFailedLocked(err)
	default:
		c.spares.failures, c.spares.bo = 0, nil
		s := &spare{b: b}
		c.spares.ready = append(c.spares.ready, s)
		c.watchSpare(s)
		e := Event{Kind: EventStandby}
		if b.Process != nil {
			e.Exit.PID = b.Process.PID
		}
		c.emit(e)
	}
}

// spareFailedLocked launches another spare after the backoff, once a
// spare's launch failed with err; after a permanent failure, a backoff
// that says stop, or maxSpareFailures failures in a row, it stops the
// launching of spares until a plugin comes up. The crash-loop breaker is
// not involved: it is for the plugin that serves. c.mu is held.
func (c *Conn) spareFailedLocked(err error) {
	st := &c.spares
	st.failures++
	d := nextBackOff(&st.bo, c.opts)
	if errors.Is(err, ErrPermanent) || d == backoff.Stop || st.failures >= maxSpareFailures {
		st.failed, st.failures, st.bo = true, 0, nil // counted afresh once allowed again
		return
	}
	st.retry = max(d, 0)
	c.fillLocked()
}

// watchSpare discards s and launches another when its process exits before
// it is promoted; no goroutine waits meanwhile. c.mu is held.
func (c *Conn) watchSpare(s *spare) {
	p := s.b.Process
	if p == nil {
		return
	}
	s.unwatch = c.afterExit(p, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if i := slices.Index(c.spares.ready, s); i >= 0 {
			c.spares.ready = slices.Delete(c.spares.ready, i, i+1)
			c.discard(s, exitCause(p), proc.Crashed)
			c.fillLocked()
		}
	})
}

// promote makes s generation n: for a planned replacement it checks first
// that s answers a health check within spareCheckTimeout; it calls the
// spare's [Backend.Promote], if it has one, and then checks again that s
// is still alive, as takeSpareLocked did when it took it. A spare it
// cannot promote it discards. One that dies after its last check is
// condemned as soon as it is current, by the watch on its exit.
func (c *Conn) promote(s *spare, n uint64) (*Generation, error) {
	var err error
	if s.check {
		if err = checkHealth(c.ctx, s.b, min(spareCheckTimeout, c.opts.respawnTimeout)); err != nil {
			err = fmt.Errorf("redial: spare not promoted: %w", err)
		}
	}
	if err == nil {
		err = c.promoteHook(s)
	}
	var died bool
	if s.check || s.b.Promote != nil { // time has passed since its check
		var why error
		if why, died = s.unusable(); err == nil {
			err = why
		}
	}
	if err != nil {
		c.mu.Lock()
		c.discardUnusable(s, err, died)
		c.mu.Unlock()
		return nil, err
	}
	g := c.newGeneration(n, s.b)
	c.mu.Lock()
	c.spares.promoted = g
	c.mu.Unlock()
	return g, nil
}

// forgiveSpareLocked makes the breaker forget the promotion of old, the
// plugin about to be replaced, if old is a spare killed with others (see
// spareKilledLocked): that is no launch that failed. c.mu is held.
func (c *Conn) forgiveSpareLocked(old *Generation) {
	if old == nil || old != c.spares.promoted {
		return
	}
	if c.spareKilledLocked(old) {
		c.spares.forgiven = old
		c.pace.forget()
	}
	c.spares.promoted = nil
}

// spareKilledLocked reports whether g is the last spare promoted and was
// SIGKILLed from outside before it served a call: as by a mass kill that
// signals one process after another and reached it after its check. A
// spare that crashes by itself (an exit code, another signal) is not.
// c.mu is held.
func (c *Conn) spareKilledLocked(g *Generation) bool {
	if g == nil || g != c.spares.promoted && g != c.spares.forgiven || g.Served() || g.backend.Process == nil {
		return false
	}
	e, ok := g.backend.Process.Exit()
	return ok && e.Reason == ExitCrashed && e.Signal == syscall.SIGKILL
}

// promoteHook calls s's [Backend.Promote], if it has one.
func (c *Conn) promoteHook(s *spare) error {
	if s.b.Promote == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(c.ctx, c.opts.respawnTimeout)
	defer cancel()
	if err := s.b.Promote(ctx); err != nil {
		return fmt.Errorf("redial: promote spare: %w", err)
	}
	return nil
}

// stopSpares stops the spares left when the Conn closes; its goroutines
// have ended.
func (c *Conn) stopSpares() {
	c.mu.Lock()
	ready := c.spares.ready
	c.spares.ready = nil
	c.mu.Unlock()
	for _, s := range ready {
		_ = c.stopBackend(0, s.b, proc.Closed)
	}
}

// checkHealth asks a spare whether it serves, within timeout (zero: ctx
// alone bounds it): a plugin without grpc.health.v1 counts as ready, one
// that answers other than SERVING, or does not answer, is not.
func checkHealth(ctx context.Context, b Backend, timeout time.Duration) error {
	r := probe.Check(ctx, b.Conn, "", timeout)
	switch {
	case r.Verdict.Ready():
		return nil
	case r.Err != nil:
		return fmt.Errorf("health check: %w", r.Err)
	}
	return fmt.Errorf("health check: %v", r.Status)
}
