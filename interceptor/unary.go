package interceptor

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/peer"

	"github.com/grpc-respawn/respawn/redial"
)

// UnaryClientInterceptor returns the unary interceptor bound to c. A call
// made on c's current connection goes through untouched when it succeeds;
// a call made on a connection c has retired is sent to the current one.
func (p *Policy) UnaryClientInterceptor(c *redial.Conn) grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		g := c.Current()
		if g == nil || g.ClientConn() != cc {
			if g = p.route(c, method, cc); g == nil {
				return invoker(ctx, method, req, reply, cc, opts...)
			}
		}
		err := invoker(ctx, method, req, reply, g.ClientConn(), opts...)
		if err == nil {
			// A health check answered is not a call served: a plugin that
			// answers probes but dies on every real call is a crash loop.
			if !g.Served() && !p.passthrough(method) {
				g.MarkServed()
			}
			return nil
		}
		if p.passthrough(method) {
			return err
		}
		return p.recoverUnary(ctx, c, g, method, req, reply, invoker, opts, err)
	}
}

// recoverUnary handles a failed first attempt: it respawns the plugin when
// the failure says it is gone and retries while that is safe.
func (p *Policy) recoverUnary(ctx context.Context, c *redial.Conn, g *redial.Generation, method string, req, reply any, invoker grpc.UnaryInvoker, opts []grpc.CallOption, err error) error {
	if c.Closed() {
		return redial.ErrClosed
	}
	class := Classify(err)
	r := &retrier{p: p, c: c, method: method, attempt: 1}
	retryOpts := append(opts[:len(opts):len(opts)], grpc.WaitForReady(true), nil)
	for {
		switch p.judge(ctx, method, opts, class) {
		case giveUp:
			return err
		case unknown:
			return p.outcomeUnknown(c, g, method, r.attempt, err)
		}
		ng, nerr := r.next(ctx, g, err, class)
		if nerr != nil {
			return nerr
		}
		g = ng
		var pr peer.Peer
		retryOpts[len(retryOpts)-1] = grpc.Peer(&pr)
		actx, cancel := attemptContext(ctx, g)
		err = invoker(actx, method, req, reply, g.ClientConn(), retryOpts...)
		cancel()
		if err == nil {
			g.MarkServed()
			return nil
		}
		class, err = attemptFailed(ctx, actx, err, pr.Addr != nil)
	}
}
