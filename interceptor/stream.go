package interceptor

import (
	"context"

	"google.golang.org/grpc"

	"github.com/grpc-respawn/respawn/redial"
)

// StreamClientInterceptor returns the stream interceptor bound to h's Conn. Opening
// a stream is retried under the same rules as a unary call. A
// server-streaming call is also retried if it fails before its first response
// message, by re-sending its request; once a message has been received the
// error is returned, since the caller has seen part of the answer. A client
// or bidirectional stream of an idempotent method is re-opened, and what it
// sent sent again, if its plugin dies before the call commits (see
// [Limits].ReplayBuffer); otherwise such a death ends it with
// [ErrOutcomeUnknown]. Across a re-open the stream keeps one Context
// (taking it does not commit the stream) and gives one verdict (see the
// package documentation, "Streams").
func (p *Policy) StreamClientInterceptor(h redial.Handle) grpc.StreamClientInterceptor {
	if noHandle(h) {
		return failStream
	}
	return func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		if p.opts.callIDs {
			ctx = withCallID(ctx)
		}
		if p.opts.ledger {
			ctx = withoutLedgerKeys(ctx) // streams are not kept in ledgers
		}
		g := h.Current()
		if g == nil || g.ClientConn() != cc || g.Gone() {
			var err error
			if g, err = p.reroute(h, method, cc); err != nil {
				return nil, err
			}
			if g == nil {
				return streamer(ctx, desc, cc, method, opts...)
			}
		}
		if p.passthrough(method) {
			g, err := alive(ctx, h, g)
			if err != nil {
				return nil, err
			}
			return streamer(ctx, desc, g.ClientConn(), method, opts...)
		}
		if desc.ClientStreams {
			s := newClientStream(p, h, ctx, desc, method, streamer, opts, g)
			err := errGone
			if !g.Gone() {
				s.cs, err = streamer(ctx, desc, g.ClientConn(), method, s.opts...)
			}
			if err != nil {
				if err = s.reopen(g, err); err != nil {
					return nil, err
				}
			}
			return s, nil
		}
		s := &stream{streamCore: streamCore{p: p, h: h, ctx: ctx, desc: desc, method: method, streamer: streamer}, g: g}
		var extra []grpc.CallOption
		if p.opts.resume != nil { // no map lookup without WithResume
			if f := p.opts.resume[method]; f != nil {
				// The host says how to continue it: it is safe to re-open.
				s.resume, extra = f, []grpc.CallOption{idempotentOption{ok: true}}
			}
		}
		s.keep(wireFor(opts), opts, extra...)
		err := errGone
		if !g.Gone() {
			s.cs, err = streamer(ctx, desc, g.ClientConn(), method, s.opts...)
		}
		if err == errGone {
			s.r = &retrier{p: p, h: h, method: method} // not sent: no attempt yet, no request
		}
		if err != nil {
			a := attempt{g: g}
			a.firstByGRPC(h, streamer)
			if err = s.recover(a, err, false); err != nil {
				return nil, err
			}
		}
		return s, nil
	}
}
