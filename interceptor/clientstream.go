package interceptor

import (
	"context"
	"io"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/grpc-respawn/respawn/redial"
)

// clientStream is a client-streaming or bidirectional call. Until it
// commits — a response header or message arrives, or what was sent passes
// the replay buffer — a death of its plugin re-opens it on the successor
// and sends again what was sent so far, if the method is idempotent. After
// that, a death ends it with [ErrOutcomeUnknown], and the plugin is
// respawned. That verdict is given once: every later call returns it.
//
// grpc-go allows one goroutine in SendMsg and another in RecvMsg at once.
// Each attempt has a number; whichever side sees attempt n fail first
// re-opens the stream, under mu, and the other, finding attempt n+1, goes
// on with it. A SendMsg that finds attempt n ended (io.EOF) learns no
// status: it weighs the evidence without mu, so that RecvMsg can read the
// answer meanwhile, and stops as soon as RecvMsg settles attempt n.
type clientStream struct {
	streamCore
	replay bool // idempotent: what was sent may be sent again

	// Under mu, besides streamCore's:
	a         attempt
	cancel    context.CancelFunc // ends a's ctx; nil for the first attempt
	n         int                // the attempt's number
	nsent     int                // messages sent
	committed bool
	over      bool  // the plugin (or the caller's ctx) ended the stream: RecvMsg has its status
	final     error // respawn's verdict on the stream: every later call returns it
}

var _ grpc.ClientStream = (*clientStream)(nil)

// newClientStream returns the stream of a call whose first attempt goes to
// g; the caller opens it, with s.opts.
func newClientStream(p *Policy, h redial.Handle, ctx context.Context, desc *grpc.StreamDesc, method string, streamer grpc.Streamer, opts []grpc.CallOption, g *redial.Generation) *clientStream {
	s := &clientStream{
		streamCore: streamCore{p: p, h: h, ctx: ctx, desc: desc, method: method, streamer: streamer},
		replay:     p.idempotent(method, nil, opts),
		a:          attempt{g: g}, n: 1,
	}
	var wire *wireCodec
	if s.replay {
		wire = wireFor(opts)
	}
	s.keep(wire, opts)
	return s
}

// SendMsg sends m, encoded once, and keeps its bytes for a replay until
// the stream commits. If the stream's plugin died, it is re-opened and m's
// bytes sent there.
func (s *clientStream) SendMsg(m any) error {
	msg, data := s.encode(m)
	s.mu.Lock()
	if s.final != nil {
		s.mu.Unlock()
		return s.final
	}
	if s.replay && !s.committed && (data == nil || !s.log.add(data, s.p.replayBuffer())) {
		s.commitLocked(bufferFull) // past the replay buffer, or not encoded: not kept
	}
	s.nsent++
	cs, n := s.cs, s.n
	s.mu.Unlock()
	err := cs.SendMsg(msg)
	switch err {
	case nil:
		return nil
	case io.EOF:
		return s.lost(n)
	}
	return s.failed(n, err, true)
}

// RecvMsg receives a message; a message or a header commits the stream.
// It reads a committed stream's attempt without being its reader: no
// Header reads an attempt that can no longer be re-opened.
func (s *clientStream) RecvMsg(m any) error {
	for {
		s.mu.Lock()
		s.recvLocked()
		if s.final != nil {
			s.reading = false
			s.mu.Unlock()
			return s.final
		}
		cs, n, g, committed := s.cs, s.n, s.a.g, s.committed
		s.reading = !committed
		s.mu.Unlock()
		err := cs.RecvMsg(m)
		if err == nil && committed && s.desc.ServerStreams {
			// A committed stream is never re-opened: cs and g stay.
			served(s.h, g)
			return nil
		}
		if err == nil || err == io.EOF {
			s.mu.Lock()
			s.reading = false
			if err == nil {
				s.commitLocked(messageReceived)
			} else {
				s.commitLocked(endedByPlugin)
			}
			g = s.a.g
			if err == io.EOF || !s.desc.ServerStreams {
				// The stream is over: a client stream's one answer is its end.
				s.doneLocked()
			}
			s.mu.Unlock()
			served(s.h, g)
			return err
		}
		if err = s.failed(n, err, false); err != nil {
			s.recvDone()
			return err
		}
	}
}

// reopen handles err, the failure of the stream's first attempt, on g, in
// the one recovery loop: it returns nil once the stream runs on a new
// attempt, or the error for the caller. A stream not sent, its plugin being
// gone (errGone), has had no attempt yet.
func (s *clientStream) reopen(g *redial.Generation, err error) error {
	if s.h.Closed() {
		return redial.ErrClosed
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.a.firstByGRPC(s.h, s.streamer)
	if err == errGone {
		s.n = 0
	}
	o, jerr := s.p.judgeAttempt(s.ctx, s.h, s.a, err)
	return s.afterLocked(o, err, jerr, false)
}

// failed handles the failure err of attempt n: it returns nil once the
// stream runs on a new attempt, or the error for the caller.
func (s *clientStream) failed(n int, err error, onSend bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.final != nil:
		return s.final
	case s.over:
		return err // the plugin's own end, as grpc-go returns it again
	case s.n != n:
		return nil // already re-opened, with what was sent replayed
	case s.h.Closed():
		return s.finalLocked(redial.ErrClosed)
	}
	a := s.a
	if !onSend { // RecvMsg failed: the attempt has ended, its trailer is known
		a.trailer = s.cs
	}
	o, jerr := s.p.judgeAttempt(s.ctx, s.h, a, err)
	return s.afterLocked(o, err, jerr, onSend)
}

// lost handles the end of attempt n under SendMsg (io.EOF), which carries
// no status: it returns nil once the stream runs on a new attempt, io.EOF
// if RecvMsg is to read how the stream ended, or the error that ends it.
// Only a stream that could be replayed needs the evidence; it is weighed
// without mu, and no longer than until RecvMsg settles attempt n: it reads
// the answer or the status, or re-opens the stream. A lost connection
// whose plugin lives and takes a new one was drained: the stream is
// re-opened on the same plugin.
func (s *clientStream) lost(n int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err, ok := s.lostLocked(n); ok {
		return err
	}
	wctx, a := s.settled.wait(s.ctx), s.a
	s.mu.Unlock()
	o, jerr := s.p.judgeAttempt(wctx, s.h, a, errStreamEnded)
	s.mu.Lock()
	if err, ok := s.lostLocked(n); ok {
		return err
	}
	if o.class == notConnectionFault {
		// The live plugin ended the stream: no replay. RecvMsg reads how.
		s.commitLocked(endedByPlugin)
		return io.EOF
	}
	return s.afterLocked(o, errStreamEnded, jerr, true)
}

// lostLocked is what lost returns, with ok, when the state of the stream
// decides it without evidence.
func (s *clientStream) lostLocked(n int) (err error, ok bool) {
	switch {
	case s.final != nil:
		return s.final, true
	case s.n != n:
		return nil, true // re-opened, with m replayed
	case !s.replay || !s.reopenableLocked():
		return io.EOF, true // no replay: RecvMsg reads the status, and judges a death
	case s.h.Closed():
		return s.finalLocked(redial.ErrClosed), true
	}
	return nil, false
}

// afterLocked acts on o, the verdict on the current attempt's failure err
// (jerr as judgeAttempt reports it), in the one recovery loop: it re-opens
// the stream while that is safe, and returns nil once it runs on a new
// attempt, or the error for the caller. onSend: err is SendMsg's, and
// RecvMsg reads the plugin's status.
func (s *clientStream) afterLocked(o outcome, err, jerr error, onSend bool) error {
	if o.class == notConnectionFault {
		if !onSend {
			s.overLocked()
		}
		return err
	}
	if s.r == nil {
		s.r = &retrier{p: s.p, h: s.h, method: s.method, attempt: s.n}
	}
	class, err := s.r.recover(s.ctx, s.opts, s.a, o, jerr, s.standingLocked(), s.openOn)
	switch {
	case err == nil:
		return nil
	case class == notConnectionFault:
		// A new attempt failed, and the plugin or the caller's ctx ended it.
		s.overLocked()
		return err
	}
	return s.finalLocked(err)
}

// standingLocked says where the stream stands: it may be sent again until
// it commits, if it is replayed or has sent nothing.
func (s *clientStream) standingLocked() standing {
	if !s.committed && (s.replay || s.nsent == 0 && !s.closeSent) {
		return standing{again: true}
	}
	why := reasonNotIdempotent
	if s.replay {
		why = reasonCommitted
	}
	return standing{unsure: true, sent: s.nsent > 0, why: why}
}

// errStreamEnded stands for the failure of a SendMsg that found its stream
// ended, which says nothing of why: the evidence decides.
var errStreamEnded = status.Error(codes.Unavailable, "interceptor: the stream ended under SendMsg")

// overLocked records that the plugin, or the caller's ctx, ended the
// stream: what RecvMsg returned is its end.
func (s *clientStream) overLocked() {
	s.commitLocked(endedByPlugin)
	s.over = true
	s.doneLocked()
}

// finalLocked makes err respawn's verdict on the stream, returned by every
// later call, and ends the stream.
func (s *clientStream) finalLocked(err error) error {
	s.final = err
	s.doneLocked()
	return err
}

// reopenableLocked reports whether a death of the stream's plugin would
// re-open it: no verdict, no end, and nothing sent that is not kept.
func (s *clientStream) reopenableLocked() bool {
	return s.final == nil && !s.over && s.standingLocked().again
}

// endLocked ends the current attempt's ctx.
func (s *clientStream) endLocked() {
	if s.cancel != nil {
		s.cancel()
		s.cancel = nil
	}
}

// doneLocked ends the current attempt and the stream's Context.
func (s *clientStream) doneLocked() {
	s.endLocked()
	s.streamCore.doneLocked()
}

// Header returns the header metadata; a header received commits the
// stream. An attempt that ended before its header, while the stream can
// still be replayed, is judged here: if its plugin died, the stream is
// re-opened and the header is the successor's.
func (s *clientStream) Header() (metadata.MD, error) {
	for {
		s.mu.Lock()
		cs, n := s.cs, s.n
		s.mu.Unlock()
		md, err := cs.Header()
		if err != nil {
			return md, err
		}
		if md != nil {
			s.mu.Lock()
			again := s.n != n // re-opened meanwhile: the header is the new attempt's
			if !again {
				s.commitLocked(headerReceived)
			}
			s.mu.Unlock()
			if !again {
				return md, nil
			}
			continue
		}
		// grpc-go's nil, nil: the attempt ended without a header, and
		// RecvMsg has its status.
		if !s.headerLost(n) {
			return nil, nil
		}
	}
}

// headerLost handles attempt n, which ended before its header: it reports
// whether the stream goes on with a new attempt. A stream that cannot be
// re-opened is left to RecvMsg, which reads the status and judges it.
func (s *clientStream) headerLost(n int) bool {
	return s.streamCore.headerLost(s.ctx, func() (bool, bool) {
		next := s.n != n
		return next, !next && s.reopenableLocked()
	}, func(err error) bool {
		if err == nil || err == io.EOF {
			s.mu.Lock()
			if s.n == n {
				s.commitLocked(endedByPlugin) // the plugin ended it: RecvMsg returns how
			}
			s.mu.Unlock()
			return false
		}
		return s.failed(n, err, false) == nil
	})
}

// Context returns the stream's context (see [streamCore.contextLocked]).
func (s *clientStream) Context() context.Context {
	if c := s.lctx.Load(); c != nil {
		return c
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.commitLocked(contextTaken)
	return s.contextLocked(s.ctx, s.done || !s.reopenableLocked())
}
