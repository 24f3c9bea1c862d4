package redial

import (
	"context"
	"errors"
	"time"
)

// Connect returns once a live plugin is current: it starts the first
// plugin if none runs yet, and if the current one is known dead it waits
// for its successor. A launch that fails is tried again, under the Conn's
// own pacing: the backoff between failed launches, the launch rate bound,
// and the crash-loop breaker, whose cool-down Connect waits out before the
// one launch it then lets through. So a host that starts while its plugin
// cannot start yet (a volume not mounted) waits for it with one call, and
// a plugin that never starts is launched no more often than the breaker
// allows, however long Connect waits.
//
// Connect fails when ctx is done (without a deadline, after
// Pacing.MaxWait: the error then matches [ErrNoPlugin]), with an error that
// unwraps both to ctx.Err() and to the last launch's failure (matching
// [ErrCrashLoop] while the breaker is open); at once when a failure is
// permanent ([ErrPermanent]); and with [ErrClosed] once the Conn is
// closed. Use it to fail at start-up rather than on the first call.
func (c *Conn) Connect(ctx context.Context) error {
	if c.closed.Load() || c.hook == nil {
		return c.closedErr()
	}
	wait, max := ctx, time.Duration(0)
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		wait, cancel = context.WithTimeout(ctx, c.opts.maxWait)
		defer cancel()
		max = c.opts.maxWait
	}
	var failed error // the last launch's failure
	for {
		g := c.cur.Load()
		if g != nil && !g.Gone() {
			return nil
		}
		if wait.Err() != nil {
			return c.gaveUp(ctx, max, failed)
		}
		var cause error
		if g != nil {
			cause = exitCause(g.backend.Process)
		}
		_, err := c.replace(wait, g, cause)
		switch {
		case err == nil:
			continue // the new plugin may have died already
		case errors.Is(err, ErrPermanent), errors.Is(err, ErrClosed):
			return err
		}
		if we := (*waitError)(nil); errors.As(err, &we) {
			if failed == nil {
				failed = we.last
			}
			return c.gaveUp(ctx, max, failed) // the launch goes on without us
		}
		failed = err
		c.waitBreaker(wait, err)
	}
}

// waitBreaker waits, if err says the crash-loop breaker is open, until it
// lets a launch through again, or wait ends. After any other failure the
// next launch waits the backoff itself.
func (c *Conn) waitBreaker(wait context.Context, err error) {
	var cl *CrashLoopError
	if !errors.As(err, &cl) {
		return
	}
	t := time.NewTimer(max(cl.Until.Sub(c.opts.now()), time.Millisecond))
	defer t.Stop()
	select {
	case <-t.C:
	case <-wait.Done():
	}
}

// gaveUp is the error of a Connect that stopped waiting: ctx ended, or
// without a deadline Pacing.MaxWait (max) ran out; last is the last
// launch's failure.
func (c *Conn) gaveUp(ctx context.Context, max time.Duration, last error) error {
	if err := ctx.Err(); err != nil || max == 0 {
		if err == nil {
			err = context.DeadlineExceeded
		}
		return &waitError{plugin: c.opts.name, err: err, failed: last}
	}
	return &waitError{plugin: c.opts.name, err: ErrNoPlugin, max: max, failed: last}
}
