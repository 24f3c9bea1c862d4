package interceptor

import (
	"context"
	"io"
	"math"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"github.com/grpc-respawn/respawn/redial"
)

// stream is a server-streaming call that can be re-opened on a new plugin
// until its first response arrives. Its reader (see [streamCore]), or
// before the stream is returned the interceptor, writes cs, under mu; the
// other methods read cs under mu. The error that ends the stream is kept:
// every later RecvMsg returns it, unjudged.
type stream struct {
	streamCore

	// The current attempt, owned by its reader. The first attempt runs on
	// the caller's ctx; a retry on actx, which ends when its plugin's
	// process exits, and records its peer in pr.
	g      *redial.Generation
	actx   context.Context
	cancel context.CancelFunc
	pr     *peer.Peer

	// Under mu: the stream's end, as RecvMsg returned it; and whether
	// SendMsg was called twice, which no longer replays. The sent log
	// keeps the request until a response arrives.
	final       error
	unretryable bool
	// received: the current attempt delivered a message. Written by its
	// reader only, under mu; RecvMsg reads it without: no Header reads an
	// attempt that answered, and only RecvMsg re-opens the stream then.
	received bool

	// req is the request, for WithIdempotencyFunc. With a WithResume
	// function for the method: the request and the last message received,
	// from which it makes the request that continues the stream on a new
	// plugin. Only the RecvMsg goroutine writes last.
	resume  func(req, last any) (any, bool)
	req     any
	last    any
	resumed bool // the caller has received messages of an earlier attempt
}

var _ grpc.ClientStream = (*stream)(nil)

// recover handles err, the failure of attempt a: it respawns the plugin
// when the evidence says it is gone and opens the stream again while that
// is safe. delivered says that a's plugin delivered messages before it
// failed: the request did not kill it, so its death is no poison's.
func (s *stream) recover(a attempt, err error, delivered bool) error {
	if s.h.Closed() {
		return redial.ErrClosed
	}
	if s.r == nil {
		s.r = &retrier{p: s.p, h: s.h, method: s.method, req: s.request(), attempt: 1}
	}
	o, err := s.p.judgeAttempt(s.ctx, s.h, a, err)
	if delivered {
		o.killed = false
	}
	_, err = s.r.recover(s.ctx, s.opts, a, o, err, standing{again: true, resumed: s.resumed}, s.openOn)
	return err
}

// request returns the server-streaming call's request, if it was sent,
// for WithIdempotencyFunc.
func (s *stream) request() any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.req
}

// Header returns the header metadata. An attempt that ended before its
// header, while the stream can be re-opened, is judged here: if its plugin
// died, the stream is re-opened and the header is the successor's.
func (s *stream) Header() (metadata.MD, error) {
	for {
		cs := s.current()
		md, err := cs.Header()
		if md != nil {
			s.mu.Lock()
			if s.cs == cs {
				s.commitLocked(headerReceived)
			}
			s.mu.Unlock()
		}
		if md != nil || err != nil {
			return md, err
		}
		// grpc-go's nil, nil: the attempt ended without a header, and
		// RecvMsg has its status.
		if !s.headerLost(cs) {
			return nil, nil
		}
	}
}

// headerLost handles the attempt of cs, which ended before its header:
// it reports whether the stream goes on with a new attempt.
func (s *stream) headerLost(cs grpc.ClientStream) bool {
	return s.streamCore.headerLost(s.ctx, func() (bool, bool) {
		next := s.cs != cs
		return next, !next && s.final == nil
	}, func(err error) bool {
		return err != nil && s.failed(err) == nil
	})
}

// Context returns the stream's context (see [streamCore.contextLocked]).
func (s *stream) Context() context.Context {
	if c := s.lctx.Load(); c != nil {
		return c
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.commitLocked(contextTaken)
	return s.contextLocked(s.ctx, s.done || s.unretryable || s.received && s.resume == nil)
}

// SendMsg sends m, encoded once, and keeps its bytes for a retry. A
// server-streaming call sends one message; a second one before the first
// response ends retries.
func (s *stream) SendMsg(m any) error {
	msg, data := s.encode(m)
	s.mu.Lock()
	switch {
	case s.received || s.unretryable:
	case s.req == nil && data != nil:
		s.log.add(data, math.MaxInt)
		s.req = m
	default:
		s.commitLocked(bufferFull)
	}
	cs := s.cs
	s.mu.Unlock()
	return cs.SendMsg(msg)
}

// RecvMsg receives a message; before the first one, a connection fault
// re-opens the stream on a fresh plugin when that is safe.
func (s *stream) RecvMsg(m any) error {
	var err error
	if s.received {
		// The attempt answered: nothing else reads it or re-opens the
		// stream, so this takes no lock until it fails.
		if s.final != nil {
			return s.final
		}
		if err = s.cs.RecvMsg(m); err == nil {
			if s.resume != nil {
				s.last = m
			}
			return nil
		}
	}
	s.mu.Lock()
	s.recvLocked()
	s.reading = true
	final := s.final
	s.mu.Unlock()
	if final != nil {
		s.recvDone()
		return final
	}
	for {
		if err != nil {
			if err = s.failed(err); err != nil {
				s.recvDone()
				return err
			}
		}
		if err = s.cs.RecvMsg(m); err == nil {
			s.mu.Lock()
			first := !s.received
			s.received, s.reading = true, false
			s.commitLocked(messageReceived)
			s.mu.Unlock()
			if first {
				served(s.h, s.g)
			}
			if s.resume != nil {
				s.last = m
			}
			return nil
		}
	}
}

// failed handles err, the end of the current attempt; its reader calls it. It
// returns nil once the stream goes on with a new attempt, or the error that
// ends the stream, which every later RecvMsg returns.
func (s *stream) failed(err error) error {
	a := s.endAttempt()
	if err == io.EOF {
		served(s.h, a.g) // a clean end, even with no message, is a call served
		return s.end(err)
	}
	s.mu.Lock()
	resumed := false
	if s.received && !s.unretryable && s.resume != nil {
		// Continue where the caller is, rather than from the start.
		if next, ok := s.resume(s.req, s.last); ok {
			if data, err := s.wire.codec.Marshal(next); err == nil {
				s.received, resumed = false, true
				s.dropSentLocked()
				s.log.add(data, math.MaxInt)
				data.Free()
			}
		}
	}
	received := s.received
	retryable := !received && !s.unretryable
	s.mu.Unlock()
	if !retryable || s.h.Closed() {
		o, err := s.p.judgeAttempt(s.ctx, s.h, a, err)
		r := s.r
		if r == nil {
			r = &retrier{p: s.p, h: s.h, method: s.method, attempt: 1}
		}
		_, err = r.after(s.ctx, s.opts, a.g, o, err, standing{received: received})
		return s.end(err)
	}
	if resumed {
		// The continued stream is a new call: it has its own budget
		// of attempts and of deaths.
		s.r, s.resumed = nil, true
	}
	if err := s.recover(a, err, resumed); err != nil {
		return s.end(err)
	}
	return nil
}

// commitLocked commits the stream if e does (see [commitTable]): it drops
// the replay log, and the stream is not re-opened by a replay of it. A
// stream that has received messages may still be continued (WithResume).
func (s *stream) commitLocked(e streamEvent) {
	if !commits(s.desc, e) {
		return
	}
	s.dropSentLocked()
	if e != messageReceived {
		s.unretryable = true
	}
}

// end records err as the stream's end and ends its Context.
func (s *stream) end(err error) error {
	s.mu.Lock()
	s.final = err
	s.doneLocked()
	s.mu.Unlock()
	return err
}

// endAttempt ends the current attempt's ctx, once its stream has ended, and
// returns the attempt for judging its failure.
func (s *stream) endAttempt() attempt {
	a := attempt{g: s.g, actx: s.actx, pr: s.pr, trailer: s.cs}
	if s.cancel != nil {
		s.cancel()
		s.cancel, s.actx, s.pr = nil, nil, nil
	}
	return a
}
