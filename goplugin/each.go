package goplugin

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/grpc-respawn/respawn/redial"
	hook "github.com/grpc-respawn/respawn/redial/goplugin"
)

// Each hands out a plugin dispensed from the current, live plugin instance:
// once per instance, lazily, and never one of an instance that is gone. Use
// it for plugins whose stubs are bound to one instance — those that call
// back into the host through go-plugin's GRPCBroker, whose broker ids mean
// something only to the instance that handed them out — where a stub
// dispensed once cannot follow the plugin through a respawn. Declare their
// broker-bound methods with interceptor.WithBoundMethods, so that a call on
// a dead instance fails at once with redial.ErrPluginGone instead of
// reaching its successor, which would wait in vain for the broker id.
//
// An Each is safe for concurrent use. Create it with [DispenseEach].
type Each[T any] struct {
	hook *hook.Hook
	rc   *redial.Conn
	name string

	mu  sync.Mutex
	gen *redial.Generation // the instance v was dispensed from
	v   T
}

// DispenseEach returns an Each that dispenses name, as type T, from the
// plugin instances of c.
func DispenseEach[T any](c *Conn, name string) *Each[T] {
	if c == nil {
		return &Each[T]{name: name} // its Do fails, saying why
	}
	return &Each[T]{hook: c.hook, rc: c.Conn, name: name}
}

// get returns the plugin dispensed from the current instance, starting the
// first one if needed, and dispensing once per instance. If the current
// instance is dead or retired it waits, with ctx, for its successor.
func (e *Each[T]) get(ctx context.Context) (T, *redial.Generation, error) {
	var zero T
	for {
		// Connect waits for the successor of an instance known dead.
		if err := e.rc.Connect(ctx); err != nil {
			return zero, nil, err
		}
		g := e.rc.Current()
		e.mu.Lock()
		if e.gen == g {
			v := e.v
			e.mu.Unlock()
			return v, g, nil
		}
		e.mu.Unlock()
		raw, err := e.hook.Dispense(g, e.name)
		if err != nil {
			// Connect waits for the successor of an instance retired
			// meanwhile, which is then tried; or says the Conn closed.
			if cerr := e.rc.Connect(ctx); cerr != nil {
				return zero, nil, cerr
			}
			if e.rc.Current() == g { // not replaced since: the error is g's
				return zero, nil, err
			}
			continue
		}
		v, ok := raw.(T)
		if !ok {
			return zero, nil, fmt.Errorf("goplugin: %q dispenses %T, not %T", e.name, raw, zero)
		}
		e.mu.Lock()
		if e.gen == nil || e.gen.Number() < g.Number() {
			e.gen, e.v = g, v
		}
		e.mu.Unlock()
		return v, g, nil
	}
}

// doTries bounds how many instances one Do tries.
const doTries = 3

// Do calls f with the plugin of the current, live instance (dispensed
// once per instance, waiting with ctx for a live one). If f fails with
// redial.ErrPluginGone — the instance died, and the call did not
// reach it or may safely run again — Do calls f again with the plugin of
// the successor, at most three times in all. Any other error, an
// interceptor.ErrOutcomeUnknown included, is returned as it is.
func (e *Each[T]) Do(ctx context.Context, f func(T) error) error {
	if e == nil || e.rc == nil {
		return errors.New("goplugin: Do on an Each not made by DispenseEach of a Conn from Connect")
	}
	var err error
	for range doTries {
		v, g, gerr := e.get(ctx)
		if gerr != nil {
			return gerr
		}
		if err = f(v); !errors.Is(err, redial.ErrPluginGone) {
			return err
		}
		// The instance is gone, but its exit may not be reported yet:
		// wait for it, so that the next try gets the successor rather
		// than the same instance again.
		if p := g.Process(); p != nil {
			select {
			case <-p.Done():
			case <-ctx.Done():
				return err
			}
		}
	}
	return err
}
