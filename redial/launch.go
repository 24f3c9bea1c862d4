package redial

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc"

	"github.com/grpc-respawn/respawn/redial/internal/proc"
)

// launch runs the hook under the respawn timeout, dials what it returns and
// waits until the new plugin accepts a connection.
func (c *Conn) launch(n uint64, cause error) (*Generation, error) {
	b, err := c.launchBackend(Request{Generation: n, Cause: cause, DialOptions: c.opts.hookDialOptions(c.calls)}, false)
	if err != nil {
		return nil, err
	}
	return c.newGeneration(n, b), nil
}

// launchBackend runs the hook for req under the respawn timeout, dials what
// it returns and waits until the plugin accepts a connection and, with
// health, answers a health check.
func (c *Conn) launchBackend(req Request, health bool) (Backend, error) {
	n := req.Generation
	lf, env, err := c.ledgers.next()
	if err != nil {
		return Backend{}, err
	}
	req.Env = append(req.Env[:len(req.Env):len(req.Env)], env...)
	ctx, cancel := context.WithTimeout(c.ctx, c.opts.respawnTimeout)
	defer cancel()
	b, err := c.callHook(ctx, req)
	if err != nil {
		lf.die() // an abandoned hook's plugin that starts later finds no file
		return Backend{}, c.timedOut(ctx, err)
	}
	b.ledger = lf
	cc := b.Conn
	if cc == nil {
		if b.Target == "" {
			_ = c.stopBackend(n, b, proc.Abandoned)
			return Backend{}, errors.New("redial: hook returned neither a Conn nor a Target")
		}
		if cc, err = grpc.NewClient(b.Target, c.dialOpts...); err != nil {
			_ = c.stopBackend(n, b, proc.Abandoned)
			return Backend{}, fmt.Errorf("redial: dial %s: %w", b.Target, err)
		}
		b.Conn = cc
	}
	err = waitReady(ctx, cc, b.Process)
	if err == nil && health {
		err = checkHealth(ctx, b, 0)
	}
	if err != nil {
		err = c.timedOut(ctx, fmt.Errorf("redial: new plugin not ready: %w", err))
		_ = c.stopBackend(n, b, proc.Abandoned)
		return Backend{}, err
	}
	lf.kept(b.Process) // while its process lives: see kept
	return b, nil
}

// newGeneration makes b, a ready plugin, generation n.
func (c *Conn) newGeneration(n uint64, b Backend) *Generation {
	g := &Generation{n: n, cc: b.Conn, backend: b, retired: make(chan struct{}), owner: c, exited: &never, born: c.opts.now()}
	if b.Process != nil {
		g.exited = b.Process.exited()
	}
	return g
}

// timedOut returns err, or [ErrClosed] or an error matching
// [ErrRespawnTimeout] (and not context.DeadlineExceeded) if the respawn
// context ctx has ended: a hook or a dial that gives up because ctx is done
// is a respawn cut short, whichever of the two noticed first.
func (c *Conn) timedOut(ctx context.Context, err error) error {
	switch {
	case errors.Is(err, ErrClosed), errors.Is(err, ErrRespawnTimeout):
		return err
	case c.ctx.Err() != nil:
		return ErrClosed
	case ctx.Err() != nil:
		cut := err.Error()
		if err == ctx.Err() { // the bare context error: says nothing more
			cut = ""
		}
		return &timeoutError{plugin: c.opts.name, after: c.opts.respawnTimeout, cut: cut}
	}
	return err
}

// callHook runs the hook on its own goroutine so that a hook that panics or
// calls runtime.Goexit is an error (matching errHookPanic), reported at
// once, and a hook that hangs is abandoned when ctx ends. An abandoned
// hook's Backend is stopped whenever the hook finally returns.
func (c *Conn) callHook(ctx context.Context, req Request) (Backend, error) {
	type result struct {
		b   Backend
		err error
	}
	ch := make(chan result, 1)
	go func() {
		returned := false
		defer func() {
			// A panic, or runtime.Goexit (t.FailNow in a test's hook),
			// which runs this without anything to recover.
			if r := recover(); r != nil {
				ch <- result{err: fmt.Errorf("%w: %v", errHookPanic, r)}
			} else if !returned {
				ch <- result{err: fmt.Errorf("%w: it called runtime.Goexit", errHookPanic)}
			}
		}()
		b, err := c.hook.Respawn(ctx, req)
		returned = true
		ch <- result{b, err}
	}()
	select {
	case r := <-ch:
		if r.err != nil {
			_ = r.b.stop()
			return Backend{}, r.err
		}
		return r.b, nil
	case <-ctx.Done():
		// Close waits a while for these (abandonWait), so that a plugin
		// whose hook returned as the Conn closed is stopped, not orphaned
		// by a host that exits right after Close.
		c.abandoned.Add(1)
		go func() {
			defer c.abandoned.Done()
			r := <-ch
			_ = r.b.stop()
		}()
		return Backend{}, ctx.Err() // launch's timedOut says closed or timed out
	}
}
