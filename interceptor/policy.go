package interceptor

import (
	"context"
	"errors"
	"time"

	"github.com/cenkalti/backoff/v4"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grpc-respawn/respawn/redial"
)

// Policy is respawn's call policy: it classifies failed calls, asks redial
// for a fresh plugin and retries what is safe to retry. One Policy may serve
// many Conns. It is safe for concurrent use. A zero Policy is valid and uses
// the default of every option; [New] sets others.
type Policy struct {
	opts options
}

// New returns a Policy. Pass it to redial.WithPolicy, or place its
// interceptors in a chain of your own in a redial.PolicyFunc.
func New(opts ...Option) *Policy {
	p := &Policy{}
	for _, o := range opts {
		if o != nil {
			o.apply(&p.opts)
		}
	}
	return p
}

// passthrough reports whether method is never retried nor taken as a
// sign of death.
func (p *Policy) passthrough(method string) bool {
	return instanceMethod(method) || p.opts.passthrough != nil && p.opts.passthrough(method)
}

func (p *Policy) maxAttempts() int {
	if n := p.opts.maxAttempts; n > 0 {
		return n
	}
	return defaultMaxAttempts
}

func (p *Policy) evidenceWait() time.Duration {
	switch d := p.opts.evidence; {
	case d == 0:
		return defaultEvidenceWait
	case d < 0:
		return 0
	default:
		return d
	}
}

func (p *Policy) replayBuffer() int {
	if n := p.opts.replay; n > 0 {
		return n
	}
	return defaultReplayBuffer
}

// DialOptions returns the unary and stream interceptors bound to h's Conn, each
// installed with grpc.WithChainUnaryInterceptor or
// grpc.WithChainStreamInterceptor so they compose with the host's own.
// Interceptors given before them run first, once per call; respawn's retries
// happen inside. It implements redial.Policy.
//
// It also disables grpc-go's own retries (grpc.WithDisableRetry) on the
// connection, whatever its service config says: grpc-go would spend a
// retryPolicy's attempts, with their backoff, on the dead plugin's
// connection, which can never reach the successor, and would replay calls
// that are not idempotent; respawn retries with knowledge of both.
func (p *Policy) DialOptions(h redial.Handle) []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithChainUnaryInterceptor(p.UnaryClientInterceptor(h)),
		grpc.WithChainStreamInterceptor(p.StreamClientInterceptor(h)),
		grpc.WithDisableRetry(),
	}
}

var _ redial.Policy = (*Policy)(nil)

// bound reports whether method's calls belong to the plugin they were made
// on (WithBoundMethods).
func (p *Policy) bound(method string) bool {
	return p.opts.bound != nil && p.opts.bound(method)
}

// route picks where a call made on cc goes: the current plugin if cc is
// ours, nil if the call must go where it was sent (an [instanceMethod], or
// a connection redial does not know). The caller checks whether the
// generation is Gone: a dead plugin is not sent the call, which waits for
// its successor as a call that was never sent.
func route(h redial.Handle, method string, cc *grpc.ClientConn) *redial.Generation {
	if instanceMethod(method) {
		return nil
	}
	return h.Route(cc)
}

// reroute is route for the unary and stream interceptors, with the rule of
// [WithBoundMethods]: such a call never goes to another plugin, nor to a
// dead one, nor waits for one; it fails with redial.ErrPluginGone.
func (p *Policy) reroute(h redial.Handle, method string, cc *grpc.ClientConn) (*redial.Generation, error) {
	g := route(h, method, cc)
	if g != nil && p.bound(method) && (g.ClientConn() != cc || g.Gone()) {
		return nil, redial.ErrPluginGone
	}
	return g, nil
}

// alive returns g if its plugin is not known dead, and otherwise waits
// with ctx for the plugin that replaces it. A call that is not retried
// (a passthrough method) is still not sent to a plugin known to be dead:
// it goes, once, to the successor.
func alive(ctx context.Context, h redial.Handle, g *redial.Generation) (*redial.Generation, error) {
	for g.Gone() {
		var err error
		if g, err = h.Replace(ctx, g, errGone); err != nil {
			return nil, err
		}
	}
	return g, nil
}

// errGone is the failure of a call not sent because its plugin was known
// to be dead.
var errGone = status.Error(codes.Unavailable, "interceptor: the plugin is gone")

// served records that g served a call: a plugin that never does counts
// towards the crash-loop breaker. Only the first call on g is not free.
func served(h redial.Handle, g *redial.Generation) {
	if !g.Served() {
		h.MarkServed(g)
	}
}

// verdict decides what a failed attempt leads to.
type verdict int

const (
	giveUp  verdict = iota // return the error as is
	unknown                // not idempotent and maybe processed
	retry
)

// judge decides what follows a failed attempt of class class. A call that
// may have run and is not idempotent is an outcome unknown even when the
// caller's ctx has ended, so that no retry layer outside runs it again.
func (p *Policy) judge(ctx context.Context, method string, req any, opts []grpc.CallOption, class faultClass) verdict {
	switch {
	case class == notConnectionFault:
		return giveUp
	case class == maybeProcessed && !p.idempotent(method, req, opts):
		return unknown
	case ctx.Err() != nil:
		return giveUp
	}
	return retry
}

// retrier is the per-call state of a failing call; built only after the
// first failure, so a successful call allocates nothing.
type retrier struct {
	p       *Policy
	h       redial.Handle
	method  string
	req     any // the request, for WithIdempotencyFunc
	attempt int
	deaths  int // plugins that died with this call in them, maybe of it
	bo      backoff.BackOff
}

// maxDeaths is how many plugins one call may see die under it, of deaths
// that may be the call's doing, before it is taken for a poison request
// and not retried again.
const maxDeaths = 2

// selfInflicted reports whether the death of g's plugin, with a call in it,
// may be the call's doing: see [redial.Exit.SelfInflicted]. A SIGKILL or
// SIGTERM from another process (an operator, a chaos run), or a stop of
// redial's own, is not; a generation without a process may be. A process
// seen dying (see [redial.Process.Dying]) whose reaper has not reported its
// exit yet is waited for, up to exitReportWait or until ctx ends: how it
// died is in that report.
func selfInflicted(ctx context.Context, g *redial.Generation) bool {
	proc := g.Process()
	if proc == nil {
		return true
	}
	e, ok := proc.Exit()
	if !ok && proc.Dying() {
		wctx, cancel := context.WithTimeout(ctx, exitReportWait)
		select {
		case <-proc.Done():
		case <-wctx.Done():
		}
		cancel()
		e, ok = proc.Exit()
	}
	return !ok || e.SelfInflicted
}

// exitReportWait bounds the wait for the exit report of a plugin the
// kernel has dying: a loaded host reports it hundreds of milliseconds late.
const exitReportWait = time.Second

// after decides what follows the failed attempt on g, judged o: it returns
// the generation for the next attempt, or the error to return to the
// caller. A live plugin that drained the connection (GOAWAY) is tried
// again; any other failure condemns g: it is respawned if it is still
// current, and the next attempt waits for its replacement.
func (r *retrier) after(ctx context.Context, opts []grpc.CallOption, g *redial.Generation, o outcome, cause error) (*redial.Generation, error) {
	if o.class != notConnectionFault && r.p.bound(r.method) {
		// Never to another plugin: the caller dispenses again.
		if !o.live {
			r.h.Condemn(g, cause)
		}
		if o.class == maybeProcessed && r.p.judge(ctx, r.method, r.req, opts, o.class) == unknown {
			return nil, outcomeUnknown(ctx, r.h, g, r.method, r.attempt, reasonNotIdempotent, cause)
		}
		if o.live {
			// Nothing proves it gone (it drained the connection): the stub
			// still reaches it.
			return nil, cause
		}
		return nil, redial.ErrPluginGone
	}
	if o.killed {
		// It took the call: the breaker is for plugins that cannot start,
		// and a request that kills every plugin stops at maxDeaths.
		served(r.h, g)
	}
	if o.killed && selfInflicted(ctx, g) {
		if r.deaths++; r.deaths >= maxDeaths {
			r.h.Condemn(g, cause)
			err := &poisonRequestError{Plugin: r.h.Name(), Method: r.method, Deaths: r.deaths, Err: cause}
			emitUnknown(ctx, r.h, g, r.method, r.attempt, err)
			return nil, err
		}
	}
	switch r.p.judge(ctx, r.method, r.req, opts, o.class) {
	case giveUp:
		return nil, cause
	case unknown:
		if !o.live {
			r.h.Condemn(g, cause) // so that the next call finds a live plugin
		}
		return nil, outcomeUnknown(ctx, r.h, g, r.method, r.attempt, reasonNotIdempotent, cause)
	}
	if o.live {
		return r.again(ctx, g, cause)
	}
	return r.next(ctx, g, cause)
}

// next returns the generation for the next attempt of a call that failed on
// g with cause, or the error to return to the caller. It waits for the
// backoff from the third attempt on.
func (r *retrier) next(ctx context.Context, g *redial.Generation, cause error) (*redial.Generation, error) {
	for {
		if r.attempt >= r.p.maxAttempts() {
			r.h.Condemn(g, cause)
			return nil, cause
		}
		if r.attempt >= 2 {
			if err := r.sleep(ctx); err != nil {
				return nil, err
			}
		}
		ng, err := r.h.Replace(ctx, g, cause)
		r.attempt++
		if err == nil && r.attempt > 1 { // attempt 1: a call sent on after its plugin was gone
			r.h.Emit(redial.Event{Kind: redial.EventRetry, Generation: ng.Number(), Method: r.method, Attempt: r.attempt, Err: cause, Context: ctx})
		}
		if err == nil {
			return ng, nil
		}
		switch {
		case ctx.Err() != nil:
			return nil, status.FromContextError(ctx.Err()).Err()
		case errors.Is(err, redial.ErrClosed), errors.Is(err, redial.ErrCrashLoop),
			errors.Is(err, redial.ErrPermanent), errors.Is(err, redial.ErrNoPlugin):
			return nil, err // no respawn of this Conn will cure it now
		}
		cause = err // the respawn failed: try another while attempts remain
	}
}

// again returns the generation for another attempt without condemning g: a
// new stream on the current connection makes grpc-go open a new transport to
// the same plugin. If that plugin is gone after all, that attempt fails
// with evidence of it and respawns it.
func (r *retrier) again(ctx context.Context, g *redial.Generation, cause error) (*redial.Generation, error) {
	if r.attempt >= r.p.maxAttempts() {
		return nil, cause
	}
	if r.attempt >= 2 {
		if err := r.sleep(ctx); err != nil {
			return nil, err
		}
	}
	if cur := r.h.Current(); cur != nil {
		g = cur // g or, if someone replaced it meanwhile, its successor
	}
	r.attempt++
	r.h.Emit(redial.Event{Kind: redial.EventRetry, Generation: g.Number(), Method: r.method, Attempt: r.attempt, Err: cause, Context: ctx})
	return g, nil
}

func (r *retrier) sleep(ctx context.Context) error {
	if r.bo == nil {
		r.bo = defaultBackOff()
	}
	d := r.bo.NextBackOff()
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return status.FromContextError(ctx.Err()).Err()
	}
}

// errNoHandle fails every call made through interceptors given a nil or
// zero redial.Handle: only redial.WithPolicy hands out a usable one.
var errNoHandle = status.Error(codes.FailedPrecondition, "interceptor: no redial.Handle: the interceptors were not made from the Handle redial.WithPolicy gives a Policy")

func noHandle(h redial.Handle) bool { return h == nil }

func failUnary(context.Context, string, any, any, *grpc.ClientConn, grpc.UnaryInvoker, ...grpc.CallOption) error {
	return errNoHandle
}

func failStream(context.Context, *grpc.StreamDesc, *grpc.ClientConn, string, grpc.Streamer, ...grpc.CallOption) (grpc.ClientStream, error) {
	return nil, errNoHandle
}
