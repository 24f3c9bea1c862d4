package redial

import (
	"context"
	"time"
)

// HandleOf returns c's Handle, for tests that act as a policy would.
func HandleOf(c *Conn) Handle { return handle{c} }

// StartRespawn starts a respawn of the current generation, or of the first
// plugin if there is none, and returns at once.
func StartRespawn(c *Conn, cause error) { c.condemn(nil, cause) }

// WithClock is withClock, for tests that must not sleep.
func WithClock(now func() time.Time) Option { return withClock(now) }

// ErrHookPanic is matched by a respawn whose hook panicked.
var ErrHookPanic = errHookPanic

// ConnectOnce is one try of Connect: it starts a plugin if none is live
// and returns that one launch's outcome, as a call without a policy
// would, for tests of what a launch reports.
func (c *Conn) ConnectOnce(ctx context.Context) error {
	g := c.cur.Load()
	if g != nil && !g.Gone() {
		return nil
	}
	var cause error
	if g != nil {
		cause = exitCause(g.backend.Process)
	}
	_, err := c.replace(ctx, g, cause)
	return err
}
