package health

import (
	"context"
	"errors"
	"sync"
	"time"

	"google.golang.org/grpc/connectivity"

	"github.com/grpc-respawn/respawn/redial"
)

// Watcher watches the plugins of one redial.Conn and respawns a dead or hung
// one early. Create it with [Watch] and stop it with [Watcher.Close]. Its
// methods are safe for concurrent use; the zero value is not usable.
type Watcher struct {
	c      *redial.Conn
	cfg    Config          // with defaults
	ctx    context.Context // done on Close
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// Watch starts watching c's plugins with cfg (the zero Config is the
// defaults): the current one, and each one that replaces it, until
// [Watcher.Close] or c is closed. It does not start the first plugin; it
// waits for it. A nil c is an error.
//
// Watch does not own c: closing the Watcher leaves c open, and closing c
// ends the Watcher's work (Close must still be called to wait for it).
func Watch(c *redial.Conn, cfg Config) (*Watcher, error) {
	if c == nil {
		return nil, errors.New("health: Watch: nil Conn")
	}
	w := &Watcher{c: c, cfg: cfg.withDefaults()}
	w.ctx, w.cancel = context.WithCancel(context.Background())
	w.wg.Add(1)
	go w.run()
	return w, nil
}

// Close stops the Watcher and waits until all its goroutines have returned;
// a check in progress is abandoned, not waited out. A respawn the Watcher
// already asked for goes on: it belongs to the Conn. Close is idempotent.
func (w *Watcher) Close() {
	w.cancel()
	w.wg.Wait()
}

func (w *Watcher) run() {
	defer w.wg.Done()
	tick := time.NewTicker(w.cfg.Interval)
	defer tick.Stop()
	var g *redial.Generation
	for {
		if g = w.next(g); g == nil {
			return
		}
		tick.Reset(w.cfg.Interval)
		w.watch(g, tick)
	}
}

// next returns the generation after prev (the first one when prev is nil),
// waiting for redial to make one current, or nil once the Watcher or the
// Conn is closed.
func (w *Watcher) next(prev *redial.Generation) *redial.Generation {
	g, err := w.c.Next(w.ctx, prev)
	if err != nil {
		return nil
	}
	return g
}

// watch watches g until it is retired or the Watcher is closed.
func (w *Watcher) watch(g *redial.Generation, tick *time.Ticker) {
	ctx, cancel := context.WithCancel(w.ctx)
	gw := &genWatch{w: w, g: g, ctx: ctx}
	// A process exit needs no watching here: redial respawns the plugin
	// itself as soon as its process exits.
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		gw.watchState()
	}()
	gw.probe(tick)
	cancel()
	wg.Wait()
}

// probe checks g every interval until g is retired. Once g is condemned it
// no longer checks but asks again for the respawn, in case the last one
// failed or the breaker was open.
func (gw *genWatch) probe(tick *time.Ticker) {
	for {
		select {
		case <-tick.C:
		case <-gw.g.Retired():
			return
		case <-gw.ctx.Done():
			return
		}
		if cause := gw.cause.Load(); cause != nil {
			gw.w.c.Respawn(gw.g, *cause)
			continue
		}
		gw.check(false, gw.g.ClientConn().GetState())
	}
}

// watchState confirms with a check each connection-state change that may
// mean the plugin is gone.
func (gw *genWatch) watchState() {
	cc := gw.g.ClientConn()
	prev := cc.GetState()
	if suspicious(connectivity.Ready, prev) {
		// We may have missed the change that led here: look now.
		gw.check(true, prev)
	}
	for cc.WaitForStateChange(gw.ctx, prev) {
		s := cc.GetState()
		if s == connectivity.Shutdown {
			return
		}
		if suspicious(prev, s) && gw.cause.Load() == nil {
			gw.check(true, s)
		}
		prev = s
	}
}

// suspicious reports whether a change from one state to another may mean
// the plugin is gone. After a READY connection is lost, pick_first goes
// IDLE, not TRANSIENT_FAILURE; but the idle timeout does the same to a
// healthy connection, hence the check.
func suspicious(from, to connectivity.State) bool {
	switch to {
	case connectivity.TransientFailure:
		return true
	case connectivity.Idle, connectivity.Connecting:
		return from == connectivity.Ready
	}
	return false
}
