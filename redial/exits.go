package redial

import (
	"context"
	"errors"
	"slices"

	"github.com/grpc-respawn/respawn/redial/internal/proc"
)

// finalLocked stops all launches if p has exited with a final code, and
// returns the *FinalExitError then. c.mu is held.
func (c *Conn) finalLocked(p *Process) error {
	if p == nil {
		return nil
	}
	e, ok := p.Exit()
	if !ok || !c.final(e) {
		return nil
	}
	fe := &FinalExitError{Plugin: c.opts.name, Exit: e, Stderr: p.stderr()}
	c.pace.stop(fe)
	return fe
}

// final reports whether e is an exit the host declared final.
func (c *Conn) final(e Exit) bool {
	return e.Reason == ExitCrashed && e.Signal == 0 && slices.Contains(c.opts.finalExits, e.Code)
}

// launchFailed records the failure err of generation n's launch in the
// pacer and returns the error callers get. c.mu is held.
func (c *Conn) launchFailed(n uint64, err error) error {
	if ee := (*proc.ExitError)(nil); errors.As(err, &ee) && c.final(exitOf(ee.Exit)) {
		err = &FinalExitError{Plugin: c.opts.name, Exit: exitOf(ee.Exit), Stderr: ee.Stderr, from: err}
	}
	c.pace.failed(err)
	return &respawnError{c.opts.name, err}
}

// exitReporter wraps the Conn's hook so that the exit carried by a hook's
// error (the plugin died, or the hook killed it, before it was ready) is
// reported however late the hook returns, also after the respawn timeout
// made redial stop waiting for it.
type exitReporter struct {
	Respawner
	c *Conn
}

func (h exitReporter) Respawn(ctx context.Context, req Request) (Backend, error) {
	b, err := h.Respawner.Respawn(ctx, req)
	if ee := (*proc.ExitError)(nil); errors.As(err, &ee) {
		h.c.emit(Event{Kind: EventExit, Generation: req.Generation, Exit: exitOf(ee.Exit), Err: err})
	}
	return b, err
}
