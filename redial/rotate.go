package redial

import (
	"context"
	"fmt"
	"time"
)

// Rotate replaces the current plugin, although it is healthy, by a fresh
// one: for a binary upgrade, a config reload, or to recycle a plugin before
// it fails (see Pacing.Recycle). It launches the new plugin, swaps it in
// atomically, and returns once calls go to it; calls made from then on,
// also on stubs bound to the old connection (with a Policy, which reroutes
// them), go to the new plugin. Calls in flight on the old plugin finish
// there: it gets the grace period (Pacing.GracePeriod), or until its process
// exits, then the hook's Stop asks it to exit gracefully (SIGTERM for
// package command's Hook, go-plugin's Shutdown), its connection staying open until the
// process has exited so that answers sent while it drains are received.
// Its exit is reported with the reason [ExitRetired], not as a crash. So no call fails,
// non-idempotent ones included, as long as every call ends within the grace
// period plus the hook's own stop grace (command.Hook.StopGrace) for a plugin
// whose SIGTERM handler stops its server gracefully, as grpc-go's
// GracefulStop does. A go-plugin plugin is different: go-plugin's Shutdown
// stops its server at once (grpc.Server.Stop), so there calls must end
// within the grace period; set it above the longest call.
//
// With a spare ready (Pacing.Spares) the rotation promotes it, once it has
// answered a grpc.health.v1 check within 1s (a plugin that does not serve
// the health service counts as answering, as at its launch): a spare that
// does not (hung, SIGSTOPped, NOT_SERVING, dead) is discarded, reported as
// an [EventStandby] with its Err, and a fresh plugin is launched instead, so the
// healthy plugin is never retired for one that does not answer.
//
// A rotation takes a token of the launch-rate bound (Pacing.LaunchRate) and
// waits for it; it does not count towards the crash-loop breaker, and is
// refused with the breaker's error (matching [ErrCrashLoop]) while that is open, or with
// the permanent failure that stopped launches. If the launch fails, the old
// plugin stays current and Rotate returns the error. If a respawn is already
// in progress, Rotate waits for it instead: it yields a fresh plugin too.
// Before the first plugin, Rotate is [Conn.Connect].
//
// Rotate waits with ctx as [Handle.Replace] does; a caller that stops waiting
// does not abort the rotation. A Rotate racing [Conn.Close] returns
// [ErrClosed] and leaves no plugin behind. It is safe for concurrent use;
// concurrent Rotates share one launch.
func (c *Conn) Rotate(ctx context.Context) error {
	c.mu.Lock()
	if c.closed.Load() {
		c.mu.Unlock()
		return ErrClosed
	}
	old, f := c.cur.Load(), c.flight
	if old == nil || f != nil {
		c.mu.Unlock()
		_, err := c.replace(ctx, old, nil)
		return err
	}
	f, err := c.rotateLocked(old, nil)
	c.mu.Unlock()
	if err != nil {
		return err
	}
	_, err = c.await(ctx, f, nil)
	return err
}

// rotateLocked starts the planned replacement of old, the current plugin,
// onto a spare if one is ready, else onto a launch paced by the rate bound.
// why is what asked for it, nil for Rotate. c.mu is held.
func (c *Conn) rotateLocked(old *Generation, why error) (*flight, error) {
	if err := c.pace.refusePlanned(); err != nil {
		return nil, fmt.Errorf("redial: rotate: %w", err)
	}
	f := &flight{done: make(chan struct{}), planned: true, why: why}
	var delay time.Duration
	if f.spare = c.takeSpareLocked(); f.spare != nil {
		f.spare.check = true
	} else {
		var err error
		if delay, err = c.pace.planned(c.opts, c.opts.now()); err != nil {
			return nil, fmt.Errorf("redial: rotate: %w", err)
		}
	}
	c.fly(f, old, nil, delay)
	return f, nil
}

// plannedFailed returns the error of planned launch n that failed with err,
// the old plugin staying current; if that plugin died meanwhile, the
// failure is a failed respawn like any other. c.mu is held.
func (c *Conn) plannedFailed(n uint64, old *Generation, err error) error {
	if old.Gone() {
		return c.launchFailed(n, err)
	}
	return &respawnError{c.opts.name, fmt.Errorf("rotate: %w", err)}
}
