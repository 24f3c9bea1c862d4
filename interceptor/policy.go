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
// many Conns. It is safe for concurrent use; create it with [New].
type Policy struct {
	opts options
}

// New returns a Policy. Pass it to redial.WithPolicy, or bind it to a Conn
// yourself with [Policy.DialOptions].
func New(opts ...Option) *Policy {
	p := &Policy{opts: defaultOptions()}
	for _, o := range opts {
		if o != nil {
			o.apply(&p.opts)
		}
	}
	return p
}

// DialOptions returns the unary and stream interceptors bound to c, each
// installed with grpc.WithChainUnaryInterceptor or
// grpc.WithChainStreamInterceptor so they compose with the host's own.
// Interceptors given before them run first, once per call; respawn's retries
// happen inside. It implements redial.Policy.
func (p *Policy) DialOptions(c *redial.Conn) []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithChainUnaryInterceptor(p.UnaryClientInterceptor(c)),
		grpc.WithChainStreamInterceptor(p.StreamClientInterceptor(c)),
	}
}

var _ redial.Policy = (*Policy)(nil)

// DialOptions is New(opts...).DialOptions(c): the interceptors for a
// connection c does not dial itself, such as one go-plugin dials.
func DialOptions(c *redial.Conn, opts ...Option) []grpc.DialOption {
	return New(opts...).DialOptions(c)
}

// route picks where a call made on cc goes: the current plugin if cc is
// ours, nil if the call must go where it was sent.
func (p *Policy) route(c *redial.Conn, method string, cc *grpc.ClientConn) *redial.Generation {
	if p.opts.passthrough(method) {
		return nil
	}
	return c.Route(cc)
}

// verdict decides what a failed attempt leads to.
type verdict int

const (
	giveUp  verdict = iota // return the error as is
	unknown                // not idempotent and maybe processed
	retry
)

func (p *Policy) judge(ctx context.Context, method string, opts []grpc.CallOption, class Class) verdict {
	switch {
	case ctx.Err() != nil || class == NotConnectionFault:
		return giveUp
	case class == NeverSent || p.idempotent(method, opts):
		return retry
	}
	return unknown
}

// retrier is the per-call state of a failing call; built only after the
// first failure, so a successful call allocates nothing.
type retrier struct {
	p       *Policy
	c       *redial.Conn
	method  string
	attempt int
	bo      backoff.BackOff
}

// next respawns g if it is still current, waits for its replacement and the
// backoff, and returns the generation for the next attempt, or the error to
// return to the caller.
func (r *retrier) next(ctx context.Context, g *redial.Generation, cause error) (*redial.Generation, error) {
	for {
		if r.attempt >= r.p.opts.maxAttempts {
			r.c.Respawn(g, cause)
			return nil, cause
		}
		if r.attempt >= 2 {
			if err := r.sleep(ctx); err != nil {
				return nil, err
			}
		}
		ng, err := r.c.Replace(ctx, g, cause)
		r.attempt++
		if err == nil {
			r.c.Emit(redial.Event{Kind: redial.EventRetry, Generation: ng.Number(), Method: r.method, Attempt: r.attempt, Err: cause})
			return ng, nil
		}
		switch {
		case ctx.Err() != nil:
			return nil, status.FromContextError(ctx.Err()).Err()
		case errors.Is(err, redial.ErrClosed), errors.Is(err, redial.ErrCrashLoop):
			return nil, err
		}
		cause = err // the respawn failed: try another while attempts remain
	}
}

func (r *retrier) sleep(ctx context.Context) error {
	if r.bo == nil {
		r.bo = r.p.opts.backoff()
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

// errProcessExited cancels an attempt whose plugin died while the attempt
// waited for it to be ready.
var errProcessExited = errors.New("interceptor: plugin process exited")

// attemptContext returns a ctx for a retry attempt on g that is cancelled
// when g's process exits, so that an attempt queued by WaitForReady on a
// plugin that died at start does not wait out the caller's whole deadline.
func attemptContext(ctx context.Context, g *redial.Generation) (context.Context, context.CancelFunc) {
	proc := g.Process()
	if proc == nil {
		return ctx, func() {}
	}
	actx, cancel := context.WithCancelCause(ctx)
	stop := make(chan struct{})
	go func() {
		select {
		case <-proc.Done():
			cancel(errProcessExited)
		case <-stop:
		case <-actx.Done():
		}
	}()
	return actx, func() { close(stop); cancel(nil) }
}

// blameExit turns the Canceled error of an attempt that was cut short
// because its plugin died into the Unavailable it really is: the caller's own
// ctx was fine, and a caller must not read Canceled as "I gave up".
func blameExit(ctx, actx context.Context, err error) error {
	if ctx.Err() != nil || !errors.Is(context.Cause(actx), errProcessExited) {
		return err
	}
	return status.Errorf(codes.Unavailable, "interceptor: plugin exited during the attempt: %s", status.Convert(err).Message())
}

// classifyAttempt classifies a retry attempt, which carries more evidence
// than the first: whether it reached a transport, and whether its plugin
// died under it.
func classifyAttempt(ctx, actx context.Context, err error, reached bool) Class {
	if ctx.Err() == nil && errors.Is(context.Cause(actx), errProcessExited) {
		if reached {
			return MaybeProcessed
		}
		return NeverSent
	}
	class := Classify(err)
	if class == MaybeProcessed && !reached && status.Convert(err).Message() == clientConnClosing {
		return NeverSent
	}
	return class
}
