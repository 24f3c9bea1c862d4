package redial

import (
	"context"
	"errors"
	"reflect"
	"sync"
	"sync/atomic"
	"time"
	"weak"

	"google.golang.org/grpc"

	"github.com/grpc-respawn/respawn/internal/ownrpc"

	"github.com/grpc-respawn/respawn/redial/internal/proc"
	"github.com/grpc-respawn/respawn/redial/internal/relay"
)

// Conn is a gRPC client connection to a plugin that survives the plugin's
// death. It holds the current *grpc.ClientConn, replaces it through a
// [Respawner] when asked, and implements grpc.ClientConnInterface so any
// generated stub can bind to it. Every call goes to the current plugin.
//
// A Conn is safe for concurrent use. Create one with [New]. A zero Conn
// acts as a closed one: it launches nothing, its calls fail with an error
// that matches [ErrClosed] and says it was not made by New, and its Close
// returns nil.
type Conn struct {
	hook     Respawner
	opts     options
	dialOpts []grpc.DialOption
	policy   []grpc.DialOption // the Policy's
	calls    []grpc.DialOption // the Policy's, or without one the routing's

	cur    atomic.Pointer[Generation]
	closed atomic.Bool
	stats  counters
	events *relay.Relay[Event] // to the handler of WithEventHandler, nil if none

	ctx     context.Context // done on Close; respawns run under it
	cancel  context.CancelFunc
	closing atomic.Bool    // the first Close has begun: the others return at once
	wg      sync.WaitGroup // respawns, retirements and process watchers
	// abandoned counts the hook's code redial stopped waiting for: hooks a
	// launch gave up on, and Stops that were running when Close began
	// (one of them may be what called Close). Close waits up to
	// abandonWait for them to return and their plugins to be stopped.
	abandoned sync.WaitGroup

	// retired holds the connections a newer generation replaced, keyed by
	// weak.Pointer[grpc.ClientConn], so that calls still made on them (by
	// stubs bound to an old connection) are routed to the current one.
	retired sync.Map
	// lastRetired is the retired connection Route matched last. A stub
	// dispensed once from a go-plugin client sends every call on the first
	// connection, so after a respawn this spares each call the weak-pointer
	// lookup (about 100ns). It keeps one closed connection reachable.
	lastRetired atomic.Pointer[grpc.ClientConn]

	mu      sync.Mutex
	flight  *flight       // the respawn in progress, if any
	pace    pacer         // backoff and crash-loop breaker
	swapped chan struct{} // closed and replaced when a generation becomes current
	spares  standby       // Pacing.Spares's spares

	ledgers ledgers // for a policy that keeps them (Binding.Ledgers)
}

// New returns a Conn that starts plugins with hook. It does no I/O: the
// first plugin is started by [Conn.Connect] or by the first call. A nil hook
// is an error. Without [WithPolicy] failed calls are not retried: the root
// package's respawn.New is New with respawn's call policy installed.
func New(hook Respawner, opts ...Option) (*Conn, error) {
	if isNil(hook) {
		return nil, errors.New("redial: New: nil Respawner")
	}
	c := &Conn{opts: defaultOptions(), swapped: make(chan struct{})}
	c.hook = exitReporter{hook, c}
	for _, o := range opts {
		if o != nil {
			o.apply(&c.opts)
		}
	}
	c.events = newDelivery(c.opts.onEvent)
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.pace.reset()
	if c.opts.policies > 1 {
		return nil, errors.New("redial: New: WithPolicy given more than once; a Conn has one call policy")
	}
	b := c.opts.start(handle{c})
	c.ledgers.on.Store(b.Ledgers)
	c.opts.defaults = b.Defaults
	c.policy = b.DialOptions
	c.calls = c.policy
	if len(c.policy) == 0 { // no policy, or one that installs no interceptors
		c.policy, c.calls = nil, c.routeOptions()
	}
	c.dialOpts = c.opts.dialOptions(c.calls)
	return c, nil
}

// Current returns the current generation, nil before the first plugin.
func (c *Conn) Current() *Generation { return c.cur.Load() }

// next is [Handle.Next].
func (c *Conn) next(ctx context.Context, prev *Generation) (*Generation, error) {
	for {
		c.mu.Lock()
		g, swapped := c.cur.Load(), c.swapped
		c.mu.Unlock()
		if c.closed.Load() || c.hook == nil {
			return nil, c.closedErr()
		}
		if g != nil && g != prev {
			return g, nil
		}
		select {
		case <-swapped:
		case <-c.ctx.Done():
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// route is [Handle.Route].
func (c *Conn) route(cc *grpc.ClientConn) *Generation {
	cur := c.cur.Load()
	if cur != nil && cur.cc == cc {
		return cur
	}
	if cc == nil {
		return nil
	}
	if cc == c.lastRetired.Load() {
		return c.cur.Load()
	}
	if _, ours := c.retired.Load(weak.Make(cc)); ours {
		c.lastRetired.Store(cc)
		return c.cur.Load()
	}
	return nil
}

// Invoke sends a unary call to the current plugin, starting the first one if
// needed. It implements grpc.ClientConnInterface.
func (c *Conn) Invoke(ctx context.Context, method string, args, reply any, opts ...grpc.CallOption) error {
	g, err := c.current(ctx)
	if err != nil {
		return err
	}
	if c.opts.recycle.calls > 0 {
		c.countCall(g)
	}
	err = g.cc.Invoke(ctx, method, args, reply, opts...)
	if err == nil && c.policy == nil && !g.Served() && !ownrpc.Instance(method) {
		// Without a Policy nothing else records it, and the crash-loop
		// breaker would count plugins that served calls. With one, the
		// policy records it on the generation that served the call, which
		// after a reroute is not g.
		g.MarkServed()
	}
	return err
}

// NewStream opens a stream to the current plugin, starting the first one if
// needed. It implements grpc.ClientConnInterface.
func (c *Conn) NewStream(ctx context.Context, desc *grpc.StreamDesc, method string, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	g, err := c.current(ctx)
	if err != nil {
		return nil, err
	}
	if c.opts.recycle.calls > 0 {
		c.countCall(g)
	}
	return g.cc.NewStream(ctx, desc, method, opts...)
}

var _ grpc.ClientConnInterface = (*Conn)(nil)

func (c *Conn) current(ctx context.Context) (*Generation, error) {
	if c.closed.Load() || c.hook == nil {
		return nil, c.closedErr()
	}
	g := c.cur.Load()
	switch {
	case g == nil:
		return c.replace(ctx, nil, nil)
	case c.policy == nil && g.Gone():
		// A policy reroutes such a call itself; without one, this is the
		// only place that waits for the successor, and the next call after
		// a failed respawn starts another.
		return c.replace(ctx, g, exitCause(g.backend.Process))
	}
	return g, nil
}

// Stats returns the Conn's counters. Each moves as redial emits the event
// it counts, before the event handler is given it: an exit is counted when
// redial's exit watch has handled it (stopped routing to the plugin,
// started its successor), a moment after its [Process.Done] closes.
func (c *Conn) Stats() Stats {
	s := Stats{
		Exits:          c.stats.exits.Load(),
		Crashes:        c.stats.crashes.Load(),
		Respawns:       c.stats.respawns.Load(),
		FailedRespawns: c.stats.failed.Load(),
		Retries:        c.stats.retries.Load(),
		OutcomeUnknown: c.stats.unknown.Load(),
		BreakerOpens:   c.stats.opens.Load(),
		Hung:           c.stats.hung.Load(),
		DroppedEvents:  c.events.Dropped(),
		HandlerPanics:  c.events.Panics(),
		Rotations:      c.stats.rotations.Load(),
		SparesTaken:    c.stats.taken.Load(),
		SparesMissing:  c.stats.missing.Load(),
		SparesWasted:   c.stats.wasted.Load(),
	}
	if g := c.cur.Load(); g != nil {
		s.CurrentGen = g.n
	}
	return s
}

// emit is [Handle.Emit].
func (c *Conn) emit(e Event) {
	e = c.stamp(e)
	c.stats.count(&e)
	if c.events != nil {
		c.events.Push(e)
	}
}

// stamp returns e with its time and the Conn's name, unless it has them.
func (c *Conn) stamp(e Event) Event {
	if e.Time.IsZero() {
		e.Time = c.opts.now()
	}
	if e.Plugin == "" {
		e.Plugin = c.opts.name
	}
	return e
}

// abandonWait bounds how long Close waits for the hook's code that it
// does not wait for in full: hooks whose launch was abandoned (the Conn
// closed, or a respawn timed out), and Stops begun before Close.
const abandonWait = 2 * time.Second

// waitAbandoned waits up to d for abandoned hooks and Stops to return and
// their plugins to be stopped.
func (c *Conn) waitAbandoned(d time.Duration) {
	done := make(chan struct{})
	go func() {
		c.abandoned.Wait()
		close(done)
	}()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
}

// Close stops any respawn in progress, closes the connection, stops the
// plugin and its spares (Pacing.Spares) through the hook (their exits are
// [EventExit]s with Reason [ExitClosed]) and waits for redial's goroutines
// to end; it returns the error of the current plugin's [Backend.Stop].
// Calls made afterwards fail with [ErrClosed].
//
// Close runs no code of the hook or the host on its own goroutine. It waits
// in full for the Stops it causes; the hook's code that was running
// before it, a Stop of a plugin being retired or a hook that ignores its
// ctx, it waits for up to 2s, since that code may be what called it (past
// that, the Backend a hook returns late is stopped when it does). It does
// not wait for the event handler: the events it causes are given to the
// handler after those queued before it, possibly once Close has returned,
// and the last is an [EventClosed]; a host that must see them all (a log
// written before the program ends) waits for that event.
//
// Only the first Close does this. Any other, concurrent with it or after
// it, made by a Stop, by the event handler or by the host, returns nil at
// once, as a second Close of a grpc.ClientConn returns at once.
func (c *Conn) Close() error {
	if c.cancel == nil || c.closing.Swap(true) { // a zero Conn, or not the first Close
		return nil
	}
	c.mu.Lock()
	c.closed.Store(true)
	c.cancel()
	c.mu.Unlock()

	c.wg.Wait()
	c.stopSpares()
	c.waitAbandoned(abandonWait)
	var err error
	var n uint64
	if g := c.cur.Load(); g != nil {
		close(g.retired)
		n = g.n
		err = c.stopBackend(g.n, g.backend, proc.Closed)
	}
	c.ledgers.close()
	c.events.End(c.stamp(Event{Kind: EventClosed, Generation: n, Err: err}))
	return err
}

// closedErr is the error of a call on a closed Conn: [ErrClosed], or for a
// zero Conn one that matches it and says why.
func (c *Conn) closedErr() error {
	if c.hook == nil {
		return errZeroConn
	}
	return ErrClosed
}

// isNil reports whether hook is nil, or a nil func, pointer or map inside
// the interface.
func isNil(hook Respawner) bool {
	if hook == nil {
		return true
	}
	switch v := reflect.ValueOf(hook); v.Kind() {
	case reflect.Func, reflect.Pointer, reflect.Map, reflect.Chan, reflect.Interface, reflect.Slice:
		return v.IsNil()
	}
	return false
}
