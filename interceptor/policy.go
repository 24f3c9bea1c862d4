package interceptor

import (
	"context"
	"time"

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
// interceptors in a chain of your own in a redial.Policy of your own.
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

// Start returns the Binding of the Policy to h's Conn: as its DialOptions,
// the unary and stream interceptors bound to h, each installed with
// grpc.WithChainUnaryInterceptor or grpc.WithChainStreamInterceptor so
// they compose with the host's own (interceptors given before them run
// first, once per call; respawn's retries happen inside), and, with
// [WithLedger], Ledgers set, so that the Conn keeps the plugins' ledgers.
// It starts nothing. It implements redial.Policy.
//
// It also disables grpc-go's own retries (grpc.WithDisableRetry) on the
// connection, whatever its service config says: grpc-go would spend a
// retryPolicy's attempts, with their backoff, on the dead plugin's
// connection, which can never reach the successor, and would replay calls
// that are not idempotent; respawn retries with knowledge of both.
func (p *Policy) Start(h redial.Handle) redial.Binding {
	return redial.Binding{
		DialOptions: []grpc.DialOption{
			grpc.WithChainUnaryInterceptor(p.UnaryClientInterceptor(h)),
			grpc.WithChainStreamInterceptor(p.StreamClientInterceptor(h)),
			grpc.WithDisableRetry(),
		},
		Defaults: []grpc.DialOption{lbDialOption()},
		Ledgers:  p.opts.ledger,
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
