package redial

// Everything about a plugin that is no longer current: its connection
// known as retired (so calls on it are routed), the wait for its calls in
// flight, its exit seen and reported, its connection closed, and its stop.

import (
	"context"
	"runtime"
	"sync"
	"time"
	"weak"

	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"

	"github.com/grpc-respawn/respawn/redial/internal/proc"
)

// markRetired records old's connection as retired, so that Route sends
// calls still made on it to the current generation.
func (c *Conn) markRetired(old *Generation) {
	key := weak.Make(old.cc)
	c.retired.Store(key, true)
	// Drop the entry once nothing refers to the connection any more: no stub
	// can then send a call on it.
	runtime.AddCleanup(old.cc, func(k weak.Pointer[grpc.ClientConn]) { c.retired.Delete(k) }, key)
}

// retire closes old's connection and stops its plugin once the grace period
// is over or its process has exited, whichever comes first. Calls that still
// arrive on old's connection are rerouted by Route. c.mu is held.
func (c *Conn) retire(old *Generation) {
	close(old.retired)
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		old.backend.Process.Await(c.ctx, c.opts.grace)
		if old.draining.Load() {
			_ = c.drain(old)
			return
		}
		if old.Gone() {
			// Its connection is closed as the exit's watch closes it, which
			// records the calls that closing fails as never sent, whichever
			// of the two comes first.
			closeDead(old)
			// Dead and reported: what is left is cleaning up (its socket,
			// its directory), which waits behind the recoveries.
			inProcess.wait(c.ctx)
		}
		_ = c.stopBackend(old.n, old.backend, proc.Retired)
	}()
}

// watch condemns g as soon as its process exits: it reports the exit, starts
// the respawn whether or not anything is calling, and closes g's
// connection, so that calls queued on it (WaitForReady) are released and
// retried on the successor rather than wait out their deadline. Death is
// pushed, not discovered by the next call. No goroutine waits for it.
func (c *Conn) watch(g *Generation) {
	p := g.backend.Process
	if p == nil {
		return
	}
	c.afterExit(p, func() {
		c.reportExit(g.n, p)
		c.condemn(g, exitCause(p))
		if !g.draining.Load() { // drain closes it once it has read the answers
			closeDead(g) // closed again when retired: harmless
		}
	})
}

// closeDead closes the connection to a plugin whose process has exited,
// which releases the calls queued on it (WaitForReady) — but only once the
// connection has left READY, bounded by deadConnWait: a call in flight
// then fails with the transport's own error (Unavailable, the end of the
// stream) rather than with Close's "the client connection is closing"
// (Canceled), which a caller takes for its own cancellation. A connection
// that has left READY has no transport left: the calls its Close fails
// were never sent, and g records that it was released so.
func closeDead(g *Generation) {
	if waitLeft(g.cc, deadConnWait) {
		g.released.Store(true)
	}
	_ = g.cc.Close()
}

// afterExit runs f once p has exited, unless the Conn closes first or drop
// is called; meanwhile no goroutine waits, and at the exit f runs on the
// one goroutine the exit starts. c.wg counts f until it has run or been
// dropped.
func (c *Conn) afterExit(p *Process, f func()) (drop func()) {
	c.wg.Add(1)
	var once sync.Once
	end := func(run bool) { // the first of the exit, Close and drop
		once.Do(func() {
			defer c.wg.Done()
			if run {
				f()
			}
		})
	}
	var stopExit func() bool
	registered := make(chan struct{})
	stopClose := context.AfterFunc(c.ctx, func() {
		<-registered
		if stopExit() {
			end(false)
		}
	})
	stopExit = context.AfterFunc(p.Exited(), func() {
		stopClose()
		end(true)
	})
	close(registered)
	return func() {
		if stopExit() {
			stopClose()
			end(false)
		}
	}
}

// deadConnWait bounds how long closeDead waits for a dead plugin's
// connection to notice: the socket ends within microseconds of the exit.
const deadConnWait = 100 * time.Millisecond

// stopBackend stops b, a plugin redial is done with for reason, and reports
// its exit as generation n's.
func (c *Conn) stopBackend(n uint64, b Backend, reason proc.Reason) error {
	return c.release(n, b, reason, b.stop)
}

// release is the one end of a plugin redial is done with: its process
// known to be stopped by redial for reason (so its exit is not taken for a
// crash), stop run, and its exit reported as generation n's. stop is the
// hook's code, so it runs on a goroutine of its own, never on one that Close
// waits for in full: release waits for it, but one begun before Close
// only until Close begins (it returns nil then), after which Close waits
// for it as for an abandoned hook.
func (c *Conn) release(n uint64, b Backend, reason proc.Reason, stop func() error) error {
	p := b.Process
	if p != nil {
		p.markStopping(reason)
	}
	var closing <-chan struct{} // nil once Close has begun: waited for in full
	if !c.closed.Load() {
		closing = c.ctx.Done()
		c.abandoned.Add(1)
	}
	done := make(chan error, 1)
	go func() {
		if closing != nil {
			defer c.abandoned.Done()
		}
		err := stop()
		b.ledger.die()
		if p != nil {
			c.reportExit(n, p)
		}
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-closing:
		return nil
	}
}

// reportExit emits the exit of p, generation n's process, once, if it has
// exited, and applies the exit-code policy of Pacing.FinalExitCodes. It must
// not be called with c.mu held.
func (c *Conn) reportExit(n uint64, p *Process) {
	e, ok := p.Exit()
	if !ok || p.emitted.Swap(true) {
		return
	}
	var err error
	if c.final(e) {
		c.mu.Lock()
		err = c.finalLocked(p)
		c.mu.Unlock()
	}
	c.emit(Event{Kind: EventExit, Generation: n, Exit: e, Err: err})
}

// drain stops old, a plugin replaced while alive, once the grace period is
// over or its process has exited: the hook's Stop first, which asks it to
// exit gracefully and so lets it answer the calls it has, then its
// connection, once the transport has read the end of it.
func (c *Conn) drain(old *Generation) error {
	b := old.backend
	return c.release(old.n, b, proc.Retired, func() error {
		var err error
		if b.Stop != nil {
			err = b.Stop()
		}
		if p := b.Process; p != nil {
			if _, exited := p.Exit(); exited {
				waitLeft(old.cc, leaveWait)
			}
		}
		_ = b.Conn.Close()
		return err
	})
}

// waitLeft waits, at most d, until cc is no longer READY: its transport has
// read the end of the connection, and before it every answer on it. It
// reports whether cc has left READY.
func waitLeft(cc *grpc.ClientConn, d time.Duration) bool {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	for s := cc.GetState(); s == connectivity.Ready; s = cc.GetState() {
		if !cc.WaitForStateChange(ctx, s) {
			break
		}
	}
	return cc.GetState() != connectivity.Ready
}

// leaveWait bounds how long a drained plugin's connection is kept open after
// its process has exited, until the transport has read the end of it (and
// with it every answer the plugin sent before it).
const leaveWait = time.Second
