package interceptor

import (
	"context"
	"io"
	"sync"

	"google.golang.org/grpc"

	"github.com/grpc-respawn/respawn/redial"
)

// StreamClientInterceptor returns the stream interceptor bound to c. Opening
// a stream is retried under the same rules as a unary call. A
// server-streaming call is also retried if it fails before its first response
// message, by re-sending what it sent; once a message has been received the
// error is returned, since the caller has seen part of the answer. Client and
// bidirectional streams are retried only while being opened.
func (p *Policy) StreamClientInterceptor(c *redial.Conn) grpc.StreamClientInterceptor {
	return func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		g := c.Current()
		if g == nil || g.ClientConn() != cc {
			if g = p.route(c, method, cc); g == nil {
				return streamer(ctx, desc, cc, method, opts...)
			}
		}
		if p.opts.passthrough(method) {
			return streamer(ctx, desc, g.ClientConn(), method, opts...)
		}
		s := &stream{p: p, c: c, ctx: ctx, desc: desc, method: method, streamer: streamer, opts: opts}
		if err := s.open(g, nil); err != nil {
			return nil, err
		}
		if desc.ClientStreams {
			return s.ClientStream, nil
		}
		return s, nil
	}
}

// stream is a server-streaming call that can be re-opened on a new plugin
// until its first response arrives.
type stream struct {
	grpc.ClientStream
	p        *Policy
	c        *redial.Conn
	ctx      context.Context
	desc     *grpc.StreamDesc
	method   string
	streamer grpc.Streamer
	opts     []grpc.CallOption
	g        *redial.Generation
	r        *retrier

	mu        sync.Mutex
	first     any   // the first message sent: a server-streaming call's only one
	more      []any // any later ones, kept only for a retry
	nsent     int
	closeSent bool
	overflow  bool // sent more than the buffer holds: not retryable
	received  bool
}

// open opens the stream on g, retrying on the rules of a unary call while
// opening fails. A non-nil r means this is a retry: it replays what was sent.
func (s *stream) open(g *redial.Generation, err error) error {
	opts := s.opts
	if s.r != nil {
		opts = append(opts[:len(opts):len(opts)], grpc.WaitForReady(true))
	}
	if err == nil {
		if err = s.openOn(g, opts); err == nil {
			return nil
		}
	}
	for {
		if s.r == nil {
			s.r = &retrier{p: s.p, c: s.c, method: s.method, attempt: 1}
			opts = append(opts[:len(opts):len(opts)], grpc.WaitForReady(true))
		}
		switch s.p.judge(s.ctx, s.method, s.opts, Classify(err)) {
		case giveUp:
			return err
		case unknown:
			s.c.Respawn(g, err)
			s.c.Emit(redial.Event{Kind: redial.EventOutcomeUnknown, Generation: g.Number(), Method: s.method, Err: err})
			return &OutcomeUnknownError{Method: s.method, Err: err}
		}
		ng, nerr := s.r.next(s.ctx, g, err)
		if nerr != nil {
			return nerr
		}
		g = ng
		if err = s.openOn(g, opts); err == nil {
			return nil
		}
	}
}

func (s *stream) openOn(g *redial.Generation, opts []grpc.CallOption) error {
	cs, err := s.streamer(s.ctx, s.desc, g.ClientConn(), s.method, opts...)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.nsent {
		m := s.first
		if i > 0 {
			m = s.more[i-1]
		}
		if err := cs.SendMsg(m); err != nil && err != io.EOF {
			return err
		}
	}
	if s.closeSent {
		if err := cs.CloseSend(); err != nil {
			return err
		}
	}
	s.ClientStream, s.g = cs, g
	return nil
}

// SendMsg sends m and keeps it, by reference, for a retry. grpc-go already
// forbids changing a message after SendMsg.
func (s *stream) SendMsg(m any) error {
	s.mu.Lock()
	switch {
	case s.received || s.overflow:
	case s.nsent == 0:
		s.first, s.nsent = m, 1
	case s.nsent < s.p.opts.streamBuffer:
		s.more = append(s.more, m)
		s.nsent++
	default:
		s.overflow, s.first, s.more, s.nsent = true, nil, nil, 0
	}
	cs := s.ClientStream
	s.mu.Unlock()
	return cs.SendMsg(m)
}

// CloseSend closes the sending side and remembers it for a retry.
func (s *stream) CloseSend() error {
	s.mu.Lock()
	s.closeSent = true
	cs := s.ClientStream
	s.mu.Unlock()
	return cs.CloseSend()
}

// RecvMsg receives a message; before the first one, a connection fault
// re-opens the stream on a fresh plugin when that is safe.
func (s *stream) RecvMsg(m any) error {
	for {
		err := s.ClientStream.RecvMsg(m)
		if err == nil {
			if !s.received {
				s.mu.Lock()
				s.received, s.first, s.more, s.nsent = true, nil, nil, 0
				s.mu.Unlock()
				s.g.MarkHealthy()
			}
			return nil
		}
		if err == io.EOF {
			return err
		}
		if s.received || s.overflow || s.c.Closed() {
			if s.p.judge(s.ctx, s.method, s.opts, Classify(err)) != giveUp {
				s.c.Respawn(s.g, err) // so the next call finds a live plugin
			}
			return err
		}
		if err := s.open(s.g, err); err != nil {
			return err
		}
	}
}
