package interceptor

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"github.com/grpc-respawn/respawn/redial"
)

// UnaryClientInterceptor returns the unary interceptor bound to h's Conn. A
// call made on its current connection goes through untouched when it
// succeeds; a call made on a connection the Conn has retired, or on one
// whose plugin is known to be dead, is sent to the current plugin.
func (p *Policy) UnaryClientInterceptor(h redial.Handle) grpc.UnaryClientInterceptor {
	if noHandle(h) {
		return failUnary
	}
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		led := p.opts.ledger && p.ledgered(method, req, opts)
		if p.opts.callIDs {
			ctx = withCallID(ctx)
		}
		if led {
			ctx = withLedgerID(ctx)
		} else if p.opts.ledger {
			ctx = withoutLedgerKeys(ctx)
		}
		g := h.Current()
		if g == nil || g.ClientConn() != cc || g.Gone() {
			var done bool
			var err error
			if g, done, err = p.rerouteUnary(ctx, h, method, req, reply, cc, invoker, opts, led); done {
				return err
			}
		}
		if led {
			g.Ledger().Hold()
		}
		err := invoker(ctx, method, req, reply, g.ClientConn(), opts...)
		if err == nil {
			if led {
				g.Ledger().Release()
			}
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
		return p.recoverUnary(ctx, h, 1, attempt{g: g}, method, req, reply, invoker, opts, err, led)
	}
}

// rerouteUnary handles a call not made on the current plugin's live
// connection: it returns the generation to send it to, or done and the
// call's outcome when it has been dealt with here. Out of the
// interceptor's body, so that the happy path stays small.
func (p *Policy) rerouteUnary(ctx context.Context, h redial.Handle, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts []grpc.CallOption, led bool) (g *redial.Generation, done bool, err error) {
	switch g, err = p.reroute(h, method, cc); {
	case err != nil:
		return nil, true, err
	case g == nil:
		return nil, true, invoker(ctx, method, req, reply, cc, opts...)
	case g.Gone() && !p.passthrough(method):
		return nil, true, p.recoverUnary(ctx, h, 0, attempt{g: g}, method, req, reply, invoker, opts, errGone, led)
	}
	if g, err = alive(ctx, h, g); err != nil {
		return nil, true, err
	}
	return g, false, nil
}

// recoverUnary handles the failed attempt a, the sent-th attempt of the
// call (0 if the call was not sent, its plugin being gone), in the one
// recovery loop: each new attempt invokes the call again on the generation
// the loop gives it. led says that the call is kept in the plugins'
// ledgers (WithLedger): its first attempt, if sent, holds a's ledger.
func (p *Policy) recoverUnary(ctx context.Context, h redial.Handle, sent int, a attempt, method string, req, reply any, invoker grpc.UnaryInvoker, opts []grpc.CallOption, err error, led bool) error {
	r := &retrier{p: p, h: h, method: method, req: req, attempt: sent, ledger: led}
	if led && sent == 1 {
		r.held = append(r.held, a.g)
	}
	defer r.releaseLedgers()
	if h.Closed() {
		return redial.ErrClosed
	}
	if sent == 1 {
		a.firstByGRPC(h, invoker)
	}
	retryOpts := append(opts[:len(opts):len(opts)], grpc.WaitForReady(true), nil, nil)
	lastErr := err
	open := func(g *redial.Generation) (attempt, error) {
		md := new(metadata.MD)
		a := attempt{g: g, pr: new(peer.Peer), trailer: mdTrailer{md}}
		retryOpts[len(retryOpts)-2], retryOpts[len(retryOpts)-1] = grpc.Peer(a.pr), grpc.Trailer(md)
		actx := withAttempt(ctx, r.attempt-1)
		if r.ledger {
			var err error
			if actx, err = r.ledgerAttempt(actx, g, lastErr); err != nil {
				return a, err
			}
			r.holdLedger(g)
		}
		actx, cancel := attemptContext(actx, g)
		a.actx = actx
		err := invoker(actx, method, req, reply, g.ClientConn(), retryOpts...)
		cancel()
		if err == nil {
			g.MarkServed()
		} else if r.ledger {
			err = r.fromLedger(ctx, g, *md, err)
		}
		lastErr = err
		return a, err
	}
	o, err := p.judgeAttempt(ctx, h, a, err)
	return r.recover(ctx, opts, a, o, err, standing{again: true}, open)
}
