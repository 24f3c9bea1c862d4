package redial

import "time"

// HandleOf returns c's Handle, for tests that act as a policy would.
func HandleOf(c *Conn) Handle { return handle{c} }

// WithClock is withClock, for tests that must not sleep.
func WithClock(now func() time.Time) Option { return withClock(now) }

// ErrHookPanic is matched by a respawn whose hook panicked.
var ErrHookPanic = errHookPanic

// Dying is dying, for tests.
func (p *Process) Dying() bool { return p.dying() }
