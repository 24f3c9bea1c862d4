package interceptor

import (
	"context"
	"io"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"github.com/grpc-respawn/respawn/redial"
)

// StreamClientInterceptor returns the stream interceptor bound to c. Opening
// a stream is retried under the same rules as a unary call. A
// server-streaming call is also retried if it fails before its first response
// message, by re-sending its request; once a message has been received the
// error is returned, since the caller has seen part of the answer. Client and
// bidirectional streams are retried only while being opened.
func (p *Policy) StreamClientInterceptor(c *redial.Conn) grpc.StreamClientInterceptor {
	return func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		g := c.Current()
		if g == nil || g.ClientConn() != cc || p.passthrough(method) {
			if g = p.route(c, method, cc); g == nil {
				return streamer(ctx, desc, cc, method, opts...)
			}
		}
		cs, err := streamer(ctx, desc, g.ClientConn(), method, opts...)
		if err == nil && desc.ClientStreams {
			return cs, nil
		}
		s := &stream{p: p, c: c, ctx: ctx, desc: desc, method: method, streamer: streamer, opts: opts, g: g, cs: cs}
		if err != nil {
			if err = s.recover(err, Classify(err)); err != nil {
				return nil, err
			}
		}
		if desc.ClientStreams {
			return s.cs, nil
		}
		return s, nil
	}
}

// stream is a server-streaming call that can be re-opened on a new plugin
// until its first response arrives. Only the goroutine that calls RecvMsg
// (or, before the stream is returned, the interceptor) writes cs, and it
// does so under mu; the other methods read cs under mu.
type stream struct {
	p        *Policy
	c        *redial.Conn
	ctx      context.Context
	desc     *grpc.StreamDesc
	method   string
	streamer grpc.Streamer
	opts     []grpc.CallOption
	r        *retrier

	// The current attempt, owned by the RecvMsg goroutine. The first
	// attempt runs on the caller's ctx; a retry on actx, which ends when its
	// plugin's process exits, and records its peer in pr.
	g      *redial.Generation
	actx   context.Context
	cancel context.CancelFunc
	pr     *peer.Peer

	mu          sync.Mutex
	cs          grpc.ClientStream
	first       any  // the request, kept for a retry until a response arrives
	closeSent   bool // CloseSend was called, to be replayed too
	unretryable bool // SendMsg was called twice: no longer replayable
	received    bool
}

var _ grpc.ClientStream = (*stream)(nil)

// recover handles err, the failure of the attempt on s.g, of class: it
// respawns the plugin when err says it is gone and opens the stream again
// while that is safe.
func (s *stream) recover(err error, class Class) error {
	if s.c.Closed() {
		return redial.ErrClosed
	}
	if s.r == nil {
		s.r = &retrier{p: s.p, c: s.c, method: s.method, attempt: 1}
	}
	g := s.g
	for {
		switch s.p.judge(s.ctx, s.method, s.opts, class) {
		case giveUp:
			return err
		case unknown:
			return s.p.outcomeUnknown(s.c, g, s.method, s.r.attempt, err)
		}
		ng, nerr := s.r.next(s.ctx, g, err, class)
		if nerr != nil {
			return nerr
		}
		g = ng
		if class, err = s.openOn(g); err == nil {
			return nil
		}
	}
}

// openOn opens a retry attempt on g and replays what was sent. It returns
// the attempt's class and error if that fails.
func (s *stream) openOn(g *redial.Generation) (Class, error) {
	// A stream given back as is (client and bidi streams) outlives this
	// interceptor's view of it, so nothing could end a per-attempt ctx.
	actx, cancel := s.ctx, context.CancelFunc(func() {})
	if !s.desc.ClientStreams {
		actx, cancel = attemptContext(s.ctx, g)
	}
	pr := new(peer.Peer)
	// A fresh slice per attempt: grpc-go keeps it until the stream ends.
	opts := append(s.opts[:len(s.opts):len(s.opts)], grpc.WaitForReady(true), grpc.Peer(pr))
	cs, err := s.streamer(actx, s.desc, g.ClientConn(), s.method, opts...)
	if err == nil {
		if err = s.replay(cs, g); err == nil {
			s.actx, s.cancel, s.pr = actx, cancel, pr
			return NotConnectionFault, nil
		}
	}
	class, err := attemptFailed(s.ctx, actx, err, pr.Addr != nil)
	cancel() // ends cs too, if the replay failed
	return class, err
}

// replay sends the request (and CloseSend) again on cs and makes cs current.
func (s *stream) replay(cs grpc.ClientStream, g *redial.Generation) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.first != nil {
		// io.EOF means cs failed; RecvMsg will say how.
		if err := cs.SendMsg(s.first); err != nil && err != io.EOF {
			return err
		}
	}
	if s.closeSent {
		if err := cs.CloseSend(); err != nil {
			return err
		}
	}
	s.cs, s.g = cs, g
	return nil
}

// current returns the current attempt's stream.
func (s *stream) current() grpc.ClientStream {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cs
}

// Header returns the current attempt's header metadata.
func (s *stream) Header() (metadata.MD, error) { return s.current().Header() }

// Trailer returns the current attempt's trailer metadata.
func (s *stream) Trailer() metadata.MD { return s.current().Trailer() }

// Context returns the current attempt's context.
func (s *stream) Context() context.Context { return s.current().Context() }

// SendMsg sends m and keeps it, by reference, for a retry. grpc-go already
// forbids changing a message after SendMsg. A server-streaming call sends
// one message; a second one before the first response ends retries.
func (s *stream) SendMsg(m any) error {
	s.mu.Lock()
	switch {
	case s.received || s.unretryable:
	case s.first == nil:
		s.first = m
	default:
		s.unretryable, s.first = true, nil
	}
	cs := s.cs
	s.mu.Unlock()
	return cs.SendMsg(m)
}

// CloseSend closes the sending side and remembers it for a retry.
func (s *stream) CloseSend() error {
	s.mu.Lock()
	s.closeSent = true
	cs := s.cs
	s.mu.Unlock()
	return cs.CloseSend()
}

// RecvMsg receives a message; before the first one, a connection fault
// re-opens the stream on a fresh plugin when that is safe.
func (s *stream) RecvMsg(m any) error {
	for {
		err := s.cs.RecvMsg(m)
		if err == nil {
			if !s.received {
				s.mu.Lock()
				s.received, s.first = true, nil
				s.mu.Unlock()
				s.g.MarkServed()
			}
			return nil
		}
		class := NotConnectionFault
		if err != io.EOF {
			class, err = s.classify(err)
		}
		s.endAttempt()
		if err == io.EOF {
			return err
		}
		s.mu.Lock()
		retryable := !s.received && !s.unretryable
		s.mu.Unlock()
		if !retryable || s.c.Closed() {
			if s.p.judge(s.ctx, s.method, s.opts, class) != giveUp {
				s.c.Respawn(s.g, err) // so the next call finds a live plugin
			}
			return err
		}
		if err := s.recover(err, class); err != nil {
			return err
		}
	}
}

// classify classifies the failure of the current attempt, with the evidence
// of a retry attempt when it is one.
func (s *stream) classify(err error) (Class, error) {
	if s.pr == nil {
		return Classify(err), err
	}
	return attemptFailed(s.ctx, s.actx, err, s.pr.Addr != nil)
}

// endAttempt ends the current attempt's ctx, once its stream has ended.
func (s *stream) endAttempt() {
	if s.cancel != nil {
		s.cancel()
		s.cancel, s.actx, s.pr = nil, nil, nil
	}
}
