package redial

import (
	"context"

	"google.golang.org/grpc"
)

// A Handle is what a [Policy] acts on its Conn through, as grpc-go gives a
// balancer a balancer.ClientConn rather than the *grpc.ClientConn: which
// plugin is current, where a call made on a connection belongs, asking for a
// replacement, and reporting what the policy saw. Hosts hold the Conn, whose
// methods are the host's; a Policy gets the Handle from [WithPolicy].
//
// The verbs about one plugin are its [Generation]'s, as grpc-go's
// per-connection verbs are balancer.SubConn's. A Handle is safe for
// concurrent use, once redial.New has returned (a Policy may call Go from
// its Start).
type Handle interface {
	// Name returns the Conn's name ([WithName]).
	Name() string
	// Current returns the current generation, nil before the first plugin.
	Current() *Generation
	// Next returns the current generation if it is not prev, and otherwise
	// waits, without starting a respawn, until another generation becomes
	// current, ctx is done, or the Conn is closed ([ErrClosed]). With a nil
	// prev it waits for the first plugin.
	Next(ctx context.Context, prev *Generation) (*Generation, error)
	// Route says where a call made on cc belongs: the current generation if
	// cc is the current connection or one this Conn has retired, and nil if
	// cc is not one of ours (for instance a go-plugin client still setting
	// itself up), in which case the call must go where it was sent.
	Route(cc *grpc.ClientConn) *Generation
	// Replace returns the generation that replaces old, and waits for it
	// with ctx, or, if ctx has no deadline, for at most the Conn's maximum
	// wait; a caller that stops waiting gets an error with a gRPC status
	// (DeadlineExceeded, Canceled, or Unavailable matching [ErrNoPlugin])
	// that still matches ctx.Err(). If old is no longer current it returns
	// the current generation at once; otherwise it starts a respawn unless
	// one is running, and waits for it. Only one respawn runs per
	// generation, however many callers ask; one caller giving up does not
	// abort it. A nil old asks for the current generation, starting the
	// first plugin if needed. cause is the failure that condemned old.
	Replace(ctx context.Context, old *Generation, cause error) (*Generation, error)
	// Emit counts e and queues it for the handler set with
	// [WithEventHandler]; it never waits for the handler. A policy reports
	// its retries and failures through it, so that one handler sees the
	// whole story. Time and Plugin are filled in if zero.
	Emit(e Event)
	// Closed reports whether [Conn.Close] has been called.
	Closed() bool
	// Go runs f on a goroutine of the Conn's: Close cancels f's ctx and
	// waits for f to return before it stops the current plugin and the
	// spares, so that a watcher never sees those stops as failures
	// (retired plugins in their grace period are stopped meanwhile). After
	// Close, f does not run. f must not call Close, which waits for it.
	Go(f func(ctx context.Context))

	// handle is unexported so that only redial implements a Handle, and a
	// method added to it breaks no one; a Handle is given, never made.
	handle()
}

// handle is the Conn's [Handle].
type handle struct{ c *Conn }

var _ Handle = handle{}

func (h handle) Name() string         { return h.c.opts.name }
func (h handle) Current() *Generation { return h.c.cur.Load() }
func (h handle) Next(ctx context.Context, prev *Generation) (*Generation, error) {
	return h.c.next(ctx, prev)
}
func (h handle) Route(cc *grpc.ClientConn) *Generation { return h.c.route(cc) }
func (h handle) Replace(ctx context.Context, old *Generation, cause error) (*Generation, error) {
	return h.c.replace(ctx, old, cause)
}
func (h handle) Emit(e Event)                   { h.c.emit(e) }
func (h handle) Closed() bool                   { return h.c.closed.Load() }
func (h handle) Go(f func(ctx context.Context)) { h.c.goWatcher(f) }
func (h handle) handle()                        {}
