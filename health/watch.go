package health

import (
	"context"
	"errors"
	"sync"
	"time"

	"google.golang.org/grpc/connectivity"

	"github.com/grpc-respawn/respawn/redial"
)

// watcher watches the plugins of one redial.Conn and respawns a dead or
// hung one early.
type watcher struct {
	c   redial.Handle
	cfg Config          // with defaults
	ctx context.Context // done when the Conn closes
}

// Watch watches, with cfg (the zero Config is the defaults), the plugins
// of the Conn whose Handle h is: the current one, and each one that
// replaces it, until the Conn is closed, whose Close stops the watch
// before it stops the plugin. It does not start the first plugin; it
// waits for it. A nil h is an error. respawn.New calls Watch unless told
// not to; a host that installs its own policy with redial.WithPolicy calls
// it from its Policy's Start.
func Watch(h redial.Handle, cfg Config) error {
	if h == nil {
		return errors.New("health: Watch: nil Handle")
	}
	if cfg.Off {
		return nil
	}
	h.Go(func(ctx context.Context) {
		w := &watcher{c: h, cfg: cfg.withDefaults(), ctx: ctx}
		w.run()
	})
	return nil
}

func (w *watcher) run() {
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
// waiting for redial to make one current, or nil once the
// Conn is closed.
func (w *watcher) next(prev *redial.Generation) *redial.Generation {
	g, err := w.c.Next(w.ctx, prev)
	if err != nil {
		return nil
	}
	return g
}

// watch watches g until it is retired or the Conn is closed.
func (w *watcher) watch(g *redial.Generation, tick *time.Ticker) {
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
	var f *inflight // the check sent and not answered yet
	defer func() {
		if f != nil {
			f.end()
		}
	}()
	for {
		select {
		case <-tick.C:
		case <-gw.g.Retired():
			return
		case <-gw.ctx.Done():
			return
		}
		if cause := gw.cause.Load(); cause != nil {
			gw.g.Condemn(*cause)
			continue
		}
		if f == nil {
			f = gw.send(gw.g.ClientConn().GetState())
		}
		if gw.round(f, false) {
			f = nil
		}
	}
}

// watchState confirms with a check each connection-state change that may
// mean the plugin is gone.
func (gw *genWatch) watchState() {
	cc := gw.g.ClientConn()
	prev := cc.GetState()
	if suspicious(connectivity.Ready, prev) {
		// We may have missed the change that led here: look now.
		gw.stateCheck(prev)
	}
	for cc.WaitForStateChange(gw.ctx, prev) {
		s := cc.GetState()
		if s == connectivity.Shutdown {
			return
		}
		if suspicious(prev, s) && gw.cause.Load() == nil {
			gw.stateCheck(s)
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
