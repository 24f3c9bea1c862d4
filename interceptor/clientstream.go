package interceptor

import (
	"context"
	"io"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/grpc-respawn/respawn/redial"
)

// clientStream is a client-streaming or bidirectional call. Until it
// commits — a response header or message arrives, or what was sent passes
// the replay buffer — a death of its plugin re-opens it on the successor
// and sends again what was sent so far, if the method is idempotent. After
// that, a death ends it with an [OutcomeUnknownError], and the plugin is
// respawned.
//
// grpc-go allows one goroutine in SendMsg and another in RecvMsg at once.
// Each attempt has a number; whichever side sees attempt n fail first
// re-opens the stream, under mu, and the other, finding attempt n+1, goes
// on with it.
type clientStream struct {
	p        *Policy
	h        *redial.Handle
	ctx      context.Context
	desc     *grpc.StreamDesc
	method   string
	streamer grpc.Streamer
	opts     []grpc.CallOption
	replay   bool // idempotent: what was sent may be sent again

	mu        sync.Mutex
	cs        grpc.ClientStream
	a         attempt
	cancel    context.CancelFunc // ends a's ctx; nil for the first attempt
	n         int                // the attempt's number
	sent      []any              // kept by reference until commit, if replay
	buf       [4]any             // sent's first backing array: short streams allocate no more
	size      int                // their cost (replayCost)
	nsent     int                // messages sent
	closeSent bool
	committed bool
	r         *retrier
}

var _ grpc.ClientStream = (*clientStream)(nil)

func newClientStream(p *Policy, h *redial.Handle, ctx context.Context, desc *grpc.StreamDesc, method string, streamer grpc.Streamer, opts []grpc.CallOption, g *redial.Generation, cs grpc.ClientStream) *clientStream {
	s := &clientStream{
		p: p, h: h, ctx: ctx, desc: desc, method: method, streamer: streamer, opts: opts,
		replay: p.idempotent(method, nil, opts),
		cs:     cs, a: attempt{g: g}, n: 1,
	}
	s.sent = s.buf[:0]
	return s
}

// SendMsg sends m and keeps it for a replay until the stream commits. If
// the stream's plugin died, it is re-opened and m sent there.
func (s *clientStream) SendMsg(m any) error {
	s.mu.Lock()
	if s.replay && !s.committed {
		if s.size += replayCost(m, s.p.replayBuffer()); s.size > s.p.replayBuffer() {
			s.commitLocked()
		} else {
			s.sent = append(s.sent, m)
		}
	}
	s.nsent++
	cs, n := s.cs, s.n
	s.mu.Unlock()
	err := cs.SendMsg(m)
	if err == nil {
		return nil
	}
	// io.EOF: the stream ended; RecvMsg says how, unless its plugin died.
	return s.failed(n, err, true)
}

// RecvMsg receives a message; a message or a header commits the stream.
func (s *clientStream) RecvMsg(m any) error {
	for {
		s.mu.Lock()
		cs, n, g, committed := s.cs, s.n, s.a.g, s.committed
		s.mu.Unlock()
		err := cs.RecvMsg(m)
		if err == nil && committed {
			// A committed stream is never re-opened: cs and g stay.
			served(s.h, g)
			return nil
		}
		if err == nil || err == io.EOF {
			s.mu.Lock()
			s.commitLocked()
			g = s.a.g
			if err == io.EOF {
				s.endLocked()
			}
			s.mu.Unlock()
			served(s.h, g)
			return err
		}
		if err = s.failed(n, err, false); err != nil {
			return err
		}
	}
}

// failed handles the failure err of attempt n: it returns nil once the
// stream runs on a new attempt, or the error for the caller. A SendMsg's
// io.EOF (onSend) carries no status: the evidence alone says whether the
// plugin died, or ended the stream itself.
func (s *clientStream) failed(n int, err error, onSend bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.n != n {
		return nil // already re-opened, with what was sent replayed
	}
	if s.h.Closed() {
		return redial.ErrClosed
	}
	cause := err
	if onSend && err == io.EOF {
		cause = errStreamEnded
	}
	for {
		a := s.a
		if !onSend { // RecvMsg failed: the attempt has ended
			a.trailer = s.cs
		}
		o, jerr := s.p.judgeAttempt(s.ctx, a, cause)
		if o.class == NotConnectionFault {
			if !onSend { // after SendMsg's io.EOF, RecvMsg reads the status
				s.endLocked()
			}
			return err
		}
		err, cause = jerr, jerr
		if s.committed || !s.replay && (s.nsent > 0 || s.closeSent) {
			s.endLocked()
			if !o.live {
				s.h.Conn().Respawn(s.a.g, err) // so that the next call finds a live plugin
			}
			if o.class == NeverSent && s.nsent == 0 {
				return err
			}
			why := NotIdempotent
			if s.replay {
				why = Committed
			}
			return outcomeUnknown(s.ctx, s.h, s.a.g, s.method, s.n, why, err)
		}
		if s.r == nil {
			s.r = &retrier{p: s.p, h: s.h, method: s.method, attempt: s.n}
		}
		g, nerr := s.r.after(s.ctx, s.opts, s.a.g, o, err)
		if nerr != nil {
			s.endLocked()
			return nerr
		}
		if cause = s.openOn(g); cause == nil {
			return nil
		}
	}
}

// errStreamEnded stands for the failure of a SendMsg that found its stream
// ended, which says nothing of why: the evidence decides.
var errStreamEnded = status.Error(codes.Unavailable, "interceptor: the stream ended under SendMsg")

// openOn opens a new attempt on g and sends again what was sent; mu is
// held. It returns the error of the attempt if that fails.
func (s *clientStream) openOn(g *redial.Generation) error {
	s.endLocked()
	actx, cancel := attemptContext(withAttempt(s.ctx, s.r.attempt-1), g)
	s.a, s.cancel, s.n = attempt{g: g, actx: actx, pr: new(peer.Peer)}, cancel, s.n+1
	cs, err := s.streamer(actx, s.desc, g.ClientConn(), s.method, retryOptions(s.opts, s.a.pr)...)
	for i := 0; err == nil && i < len(s.sent); i++ {
		err = cs.SendMsg(s.sent[i])
	}
	if err == nil && s.closeSent {
		err = cs.CloseSend()
	}
	if err == io.EOF && cs != nil {
		err = cs.RecvMsg(new(emptypb.Empty)) // the status of the failed replay
	}
	if err != nil {
		return err
	}
	s.cs = cs
	return nil
}

// commitLocked drops the replay buffer: the call will not be sent again.
func (s *clientStream) commitLocked() {
	s.committed, s.sent = true, nil
}

// endLocked ends the current attempt's ctx.
func (s *clientStream) endLocked() {
	if s.cancel != nil {
		s.cancel()
		s.cancel = nil
	}
}

// Header returns the header metadata; a header received commits the stream.
func (s *clientStream) Header() (metadata.MD, error) {
	s.mu.Lock()
	cs := s.cs
	s.mu.Unlock()
	md, err := cs.Header()
	if err == nil {
		s.mu.Lock()
		s.commitLocked()
		s.mu.Unlock()
	}
	return md, err
}

// CloseSend closes the sending side, and remembers it for a replay.
func (s *clientStream) CloseSend() error {
	s.mu.Lock()
	s.closeSent = true
	cs := s.cs
	s.mu.Unlock()
	return cs.CloseSend()
}

// Trailer returns the current attempt's trailer metadata.
func (s *clientStream) Trailer() metadata.MD {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cs.Trailer()
}

// Context returns the current attempt's context.
func (s *clientStream) Context() context.Context {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cs.Context()
}
