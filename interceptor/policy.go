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

// New returns a Policy. Pass it to redial.WithPolicy, or bind it to a Conn
// yourself with [Policy.DialOptions].
func New(opts ...Option) *Policy {
	p := &Policy{}
	for _, o := range opts {
		if o != nil {
			o.apply(&p.opts)
		}
	}
	return p
}

// passthrough reports whether method goes where it was sent, untouched.
func (p *Policy) passthrough(method string) bool {
	if f := p.opts.passthrough; f != nil {
		return f(method)
	}
	return InstanceMethod(method)
}

func (p *Policy) maxAttempts() int {
	if n := p.opts.maxAttempts; n > 0 {
		return n
	}
	return defaultMaxAttempts
}

func (p *Policy) newBackOff() backoff.BackOff {
	if f := p.opts.backoff; f != nil {
		return f()
	}
	return defaultBackOff()
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
	if p.passthrough(method) {
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

// outcomeUnknown ends a call that is not idempotent and failed on g after it
// may have reached the plugin: g is respawned all the same, so that the next
// call works, and the caller learns the outcome is unknown.
func (p *Policy) outcomeUnknown(c *redial.Conn, g *redial.Generation, method string, attempt int, err error) error {
	c.Respawn(g, err)
	c.Emit(redial.Event{Kind: redial.EventOutcomeUnknown, Generation: g.Number(), Method: method, Attempt: attempt, Err: err})
	return &OutcomeUnknownError{Method: method, Err: err}
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

// next returns the generation for the next attempt of a call that failed on
// g with cause, of class (which is not NotConnectionFault), or the error to
// return to the caller. It waits for the backoff from the third attempt on.
// A live plugin that drained the connection (GOAWAY) is tried again; any
// other failure condemns g: next respawns it if it is still current and
// waits for its replacement.
func (r *retrier) next(ctx context.Context, g *redial.Generation, cause error, class Class) (*redial.Generation, error) {
	if class == NeverSent && draining(cause) {
		return r.again(ctx, g, cause)
	}
	for {
		if r.attempt >= r.p.maxAttempts() {
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

// again returns the generation for another attempt without condemning g: a
// new stream on the current connection makes grpc-go open a new transport to
// the same plugin. If that plugin is gone after all, that attempt fails as
// NeverSent without the draining text and respawns it.
func (r *retrier) again(ctx context.Context, g *redial.Generation, cause error) (*redial.Generation, error) {
	if r.attempt >= r.p.maxAttempts() {
		return nil, cause
	}
	if r.attempt >= 2 {
		if err := r.sleep(ctx); err != nil {
			return nil, err
		}
	}
	if cur := r.c.Current(); cur != nil {
		g = cur // g or, if someone replaced it meanwhile, its successor
	}
	r.attempt++
	r.c.Emit(redial.Event{Kind: redial.EventRetry, Generation: g.Number(), Method: r.method, Attempt: r.attempt, Err: cause})
	return g, nil
}

func (r *retrier) sleep(ctx context.Context) error {
	if r.bo == nil {
		r.bo = r.p.newBackOff()
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

// attemptFailed classifies the failure err of a retry attempt run on actx,
// which carries more evidence than a first attempt: whether it reached a
// transport, and whether its plugin died under it. It also returns the
// error to report.
//
// An attempt cut short because its plugin's process exited fails with
// codes.Canceled, from our cancel of actx with cause errProcessExited, while
// the caller's own ctx is fine. Its error becomes the Unavailable it really
// is: a caller must not read Canceled as "I gave up". Any other error is the
// attempt's own, even if the process exited just after.
func attemptFailed(ctx, actx context.Context, err error, reached bool) (Class, error) {
	if ctx.Err() == nil && status.Code(err) == codes.Canceled && errors.Is(context.Cause(actx), errProcessExited) {
		err = status.Errorf(codes.Unavailable, "interceptor: plugin exited during the attempt: %s", status.Convert(err).Message())
		if reached {
			return MaybeProcessed, err
		}
		return NeverSent, err
	}
	class := Classify(err)
	if class == MaybeProcessed && !reached && status.Convert(err).Message() == clientConnClosing {
		return NeverSent, err
	}
	return class, err
}
