package interceptor

import (
	"context"
	"errors"
	"time"

	"github.com/cenkalti/backoff/v4"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"

	"github.com/grpc-respawn/respawn/redial"
)

// retrier is the per-call state of a failing call of any kind; built only
// after the first failure, so a successful call allocates nothing.
type retrier struct {
	p       *Policy
	h       redial.Handle
	method  string
	req     any // the request, for WithIdempotencyFunc
	attempt int
	deaths  int // plugins that died with this call in them, maybe of it
	bo      backoff.BackOff
	// ledger: the call is kept in the plugins' ledgers (WithLedger), and
	// holds the ledger of every generation in held until it ends;
	// deadFiles names the ledgers of the dead plugins it may have run on.
	ledger    bool
	held      []*redial.Generation
	deadFiles []string
}

// standing is where a call stands when an attempt fails, which decides
// what a connection fault leads to besides the verdict.
type standing struct {
	// again: nothing was sent that is not kept, and nothing of the answer
	// received: the call may be sent again.
	again bool
	// resumed: the caller has messages of an earlier attempt (WithResume):
	// if the call is not continued, the stream is broken.
	resumed bool
	// Once it may not be sent again: received, the caller has part of the
	// answer, and the stream is broken; unsure, the call may have run, and
	// its outcome is unknown for why, unless the attempt never reached the
	// plugin and no message was sent (sent false); otherwise the error is
	// returned as it is.
	received, unsure, sent bool
	why                    outcomeReason
}

// recover is the recovery loop of every call kind. Given the verdict o on
// the failed attempt a and its error err, it respawns the plugin when the
// evidence says it is gone and opens another attempt with open while that
// is safe. It returns nil once an attempt opened (a stream) or succeeded
// (a unary call), or the error for the caller.
func (r *retrier) recover(ctx context.Context, opts []grpc.CallOption, a attempt, o outcome, err error, st standing, open func(*redial.Generation) (attempt, error)) error {
	for {
		g, nerr := r.after(ctx, opts, a.g, o, err, st)
		if nerr != nil {
			return r.givenUp(ctx, a, o, nerr)
		}
		if a, err = open(g); err == nil {
			return nil
		}
		o, err = r.p.judgeAttempt(ctx, r.h, a, err)
		st = standing{again: true, resumed: st.resumed}
	}
}

// givenUp returns err, the error that ends a call after its failed attempt
// a, judged o, for the caller. Once the call may have run on a dead plugin
// (a ledger retry), any end but a plugin's own answer leaves its outcome
// unknown, however it came (its attempts spent, a successor never reached,
// the caller's ctx ended, the Conn closing), so that no retry layer outside
// runs it again. A connection fault after the caller's ctx ended ends with
// the ctx's code, as grpc-go's own calls do: the failure of an attempt the
// caller no longer waits for is no fault for a retry layer to retry.
func (r *retrier) givenUp(ctx context.Context, a attempt, o outcome, err error) error {
	switch {
	case isOurVerdict(err) || answered(a):
		return err
	case len(r.deadFiles) > 0:
		return outcomeUnknown(ctx, r.h, a.g, r.method, r.attempt, reasonNotIdempotent, err)
	case ctx.Err() != nil && o.class != notConnectionFault:
		return ctxEnded(ctx, err)
	}
	return err
}

// answered reports whether the failed attempt a ended with a status from
// the plugin's own trailers: its answer, from a live transport.
func answered(a attempt) bool {
	return a.trailer != nil && len(a.trailer.Trailer()) > 0
}

// after is the one place that turns the verdict o on the failed attempt on
// g into an action: it returns the generation for the next attempt, or the
// error to return to the caller (the one give-up path). A live plugin that
// drained the connection (GOAWAY) is tried again; any other failure
// condemns g: it is respawned if it is still current, and the next
// attempt waits for its replacement.
func (r *retrier) after(ctx context.Context, opts []grpc.CallOption, g *redial.Generation, o outcome, cause error, st standing) (*redial.Generation, error) {
	ng, err := r.act(ctx, opts, g, o, cause, st)
	if err != nil && st.resumed && o.class != notConnectionFault && ctx.Err() == nil && !isOurVerdict(err) {
		// As after a death without WithResume: the caller has part of
		// the answer, and a retry layer must not start it again.
		err = &streamBrokenError{Plugin: r.h.Name(), Method: r.method, Err: err}
	}
	return ng, err
}

func (r *retrier) act(ctx context.Context, opts []grpc.CallOption, g *redial.Generation, o outcome, cause error, st standing) (*redial.Generation, error) {
	switch {
	case o.class == notConnectionFault:
		return nil, cause
	case !st.again:
		if !o.live {
			g.Condemn(cause) // so that the next call finds a live plugin
		}
		switch {
		case st.received:
			// The caller has part of the answer: a retry layer must not
			// start the stream again from the top.
			return nil, &streamBrokenError{Plugin: r.h.Name(), Method: r.method, Err: cause}
		case st.unsure && (o.class != neverSent || st.sent):
			return nil, outcomeUnknown(ctx, r.h, g, r.method, r.attempt, st.why, cause)
		}
		return nil, cause
	case r.p.bound(r.method):
		// Never to another plugin: the caller dispenses again.
		if !o.live {
			g.Condemn(cause)
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
		g.MarkServed()
	}
	if o.killed && selfInflicted(ctx, g) {
		if r.deaths++; r.deaths >= maxDeaths {
			g.Condemn(cause)
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
			g.Condemn(cause) // so that the next call finds a live plugin
		}
		if r.ledger && !o.live && ctx.Err() == nil {
			if file := deadLedger(ctx, g); file != "" {
				return r.viaLedger(ctx, g, file, cause)
			}
		}
		return nil, outcomeUnknown(ctx, r.h, g, r.method, r.attempt, reasonNotIdempotent, cause)
	}
	if o.live {
		return r.again(ctx, g, cause)
	}
	return r.next(ctx, g, cause)
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

// maxDeaths is how many plugins one call may see die under it, of deaths
// that may be the call's doing, before it is taken for a poison request
// and not retried again.
const maxDeaths = 2

// selfInflicted reports whether the death of g's plugin, with a call in it,
// may be the call's doing: see [redial.Exit.SelfInflicted]. A SIGKILL or
// SIGTERM from another process (an operator, a chaos run), or a stop of
// redial's own, is not; a generation without a process may be. The call's
// evidence has the process dead, perhaps by the kernel's word before its
// reaper reported the exit: how it died is in that report, waited for up
// to exitReportWait or until ctx ends.
func selfInflicted(ctx context.Context, g *redial.Generation) bool {
	proc := g.Process()
	if proc == nil {
		return true
	}
	proc.Await(ctx, exitReportWait)
	e, ok := proc.Exit()
	return !ok || e.SelfInflicted
}

// exitReportWait bounds the wait for the exit report of a plugin the
// kernel has dying: a loaded host reports it hundreds of milliseconds late.
const exitReportWait = time.Second

// next returns the generation for the next attempt of a call that failed on
// g with cause, or the error to return to the caller. It waits for the
// backoff from the third attempt on.
func (r *retrier) next(ctx context.Context, g *redial.Generation, cause error) (*redial.Generation, error) {
	for {
		if r.attempt >= r.p.maxAttempts() {
			g.Condemn(cause)
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
