package redial

import (
	"context"
	"errors"
	"time"

	"github.com/grpc-respawn/respawn/redial/internal/proc"
)

// flight is one respawn; every caller that needs it waits on done.
type flight struct {
	done    chan struct{}
	gen     *Generation
	err     error
	planned bool   // a rotation: the plugin it replaces is alive
	why     error  // what asked for the rotation (recycling), nil for Rotate
	spare   *spare // promoted instead of a launch, if any
}

// replace is [Handle.Replace].
func (c *Conn) replace(ctx context.Context, old *Generation, cause error) (*Generation, error) {
	f, g, err := c.start(old, cause)
	if f == nil {
		return g, err
	}
	return c.await(ctx, f, cause)
}

// await waits for f as [Handle.Replace] does.
func (c *Conn) await(ctx context.Context, f *flight, cause error) (*Generation, error) {
	var noDeadline <-chan time.Time
	if _, ok := ctx.Deadline(); !ok {
		t := time.NewTimer(c.opts.maxWait)
		defer t.Stop()
		noDeadline = t.C
	}
	select {
	case <-f.done:
		return f.gen, f.err
	case <-ctx.Done():
		return nil, &waitError{plugin: c.opts.name, err: ctx.Err(), last: cause}
	case <-noDeadline:
		return nil, &waitError{plugin: c.opts.name, err: ErrNoPlugin, max: c.opts.maxWait, last: cause}
	}
}

// condemn is [Generation.Condemn].
func (c *Conn) condemn(old *Generation, cause error) {
	_, _, _ = c.start(old, cause)
}

// killHung is [Generation.KillHung].
func (c *Conn) killHung(old *Generation, cause error) {
	if old == nil || old.owner != c {
		return
	}
	select {
	case <-old.retired:
		return
	default:
	}
	if c.closed.Load() {
		return // Close stops it, gracefully
	}
	c.emit(Event{Kind: EventHung, Generation: old.n, Err: cause})
	c.condemn(old, cause)
	if p := old.Process(); p != nil {
		// Under c.mu, which Close takes to mark itself: a kill that comes
		// after that leaves the stop to Close.
		c.mu.Lock()
		if !c.closed.Load() {
			_ = p.kill()
		}
		c.mu.Unlock()
	}
}

// Reset closes the crash-loop breaker and forgets past failures, so the next
// call respawns at once.
func (c *Conn) Reset() {
	c.mu.Lock()
	wasOpen := c.pace.open
	c.pace.reset()
	c.spares.failed = false
	c.fillLocked()
	c.mu.Unlock()
	if wasOpen {
		c.emit(Event{Kind: EventBreaker})
	}
}

func (c *Conn) start(old *Generation, cause error) (*flight, *Generation, error) {
	c.mu.Lock()
	f, g, err, opened := c.startLocked(old, cause)
	c.mu.Unlock()
	// The handler runs without c.mu, so that it may call back into the Conn.
	if opened {
		c.emit(Event{Kind: EventBreaker, Err: err})
	}
	return f, g, err
}

// startLocked is start with c.mu held; opened reports that the crash-loop
// breaker has just opened.
func (c *Conn) startLocked(old *Generation, cause error) (f *flight, g *Generation, err error, opened bool) {
	if c.closed.Load() || c.hook == nil {
		return nil, nil, c.closedErr(), false
	}
	if cur := c.cur.Load(); cur != old && cur != nil {
		return nil, cur, nil, false
	}
	if c.flight != nil {
		return c.flight, nil, nil, false
	}
	if old != nil {
		// The watcher may not have seen old's exit yet: the exit-code
		// policy acts on the evidence itself.
		c.finalLocked(old.backend.Process)
	}
	c.forgiveSpareLocked(old)
	n := uint64(1)
	if old != nil {
		n = old.n + 1
	}
	now := c.opts.now()
	opened, err = c.pace.admit(c.opts, now, cause, n)
	if err != nil {
		var cl *CrashLoopError
		if errors.As(err, &cl) {
			cl.Plugin = c.opts.name
		}
		return nil, nil, err, opened
	}
	f = &flight{done: make(chan struct{})}
	var delay time.Duration
	if old != nil {
		f.spare = c.takeSpareLocked()
	}
	if f.spare == nil {
		if delay, err = c.pace.delay(c.opts, now); err != nil {
			return nil, nil, err, false
		}
	}
	c.fly(f, old, cause, delay)
	return f, nil, nil, false
}

// fly makes f, the replacement of old, the respawn in progress and runs it
// after delay. c.mu is held.
func (c *Conn) fly(f *flight, old *Generation, cause error, delay time.Duration) {
	c.flight = f
	c.wg.Add(1)
	go c.run(f, old, cause, delay)
}

func (c *Conn) run(f *flight, old *Generation, cause error, delay time.Duration) {
	defer c.wg.Done()
	var n uint64 = 1
	if old != nil {
		n = old.n + 1
	}
	if delay > 0 {
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-c.ctx.Done():
			t.Stop()
		}
	}
	why := cause
	if f.planned {
		why = f.why
	}
	c.emit(Event{Kind: EventRespawnStart, Generation: n, Err: why, Planned: f.planned})
	inProcess.begin()
	current := false // ends the recovery once served: see untilServed
	defer func() {
		if !current {
			inProcess.end()
		}
	}()
	began := time.Now()
	var g *Generation
	var err error
	promoted := false
	if f.spare != nil {
		if g, err = c.promote(f.spare, n); err == nil {
			promoted = true
		} else {
			c.stats.missing.Add(1)
		}
	}
	if !promoted && c.ctx.Err() == nil { // not closed while backing off: no hook after Close
		g, err = c.launch(n, cause)
	}

	c.mu.Lock()
	c.flight = nil
	var stale *Generation // launched while the Conn closed: stopped without c.mu
	switch {
	case c.closed.Load():
		stale, g, err = g, nil, ErrClosed
	case err != nil && f.planned:
		err = c.plannedFailed(n, old, err)
	case err != nil:
		err = c.launchFailed(n, err)
	default:
		c.pace.succeeded()
		if old != nil {
			// Known as retired before it stops being current, so that a
			// call on it is never left without a route.
			old.draining.Store(f.planned)
			c.markRetired(old)
		}
		current = true
		untilServed(g) // before anyone can call on it
		c.cur.Store(g)
		close(c.swapped)
		c.swapped = make(chan struct{})
		if old != nil {
			c.retire(old)
		} else { // the first plugin: cur is never nil again, so this runs once
			c.watchRecycleLocked()
		}
		c.watch(g)
		c.spares.failed = false
		if promoted {
			c.refillLocked()
		} else {
			c.fillLocked()
		}
	}
	c.mu.Unlock()

	if stale != nil {
		_ = c.stopBackend(n, stale.backend, proc.Closed)
	}
	// Counted before the waiters see it done: Stats is never behind what a
	// caller of Replace or Rotate has seen.
	c.emit(Event{Kind: EventRespawnDone, Generation: n, Duration: time.Since(began), Err: err,
		Planned: f.planned, Spare: promoted && err == nil})
	f.gen, f.err = g, err
	close(f.done)
}

// exitCause is the failure that condemns the generation whose process p
// has exited.
func exitCause(p *Process) error {
	if err := p.exitError(); err != nil {
		return err
	}
	return &proc.ExitError{}
}

func (c *Conn) served(g *Generation) {
	g.recovered()
	c.mu.Lock()
	closed := c.cur.Load() == g && c.pace.served(g.n)
	if closed {
		c.spares.failed = false
	}
	if closed || c.cur.Load() == g && c.spares.refill {
		c.spares.refill = false
		c.fillLocked() // none were launched while the breaker was open
	}
	c.mu.Unlock()
	if closed {
		c.emit(Event{Kind: EventBreaker, Generation: g.n})
	}
}
