package interceptor

import (
	"io"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
)

// An attempt that ended under SendMsg (io.EOF), or before its header,
// says why only through RecvMsg, which reads its status after its
// messages. Once it has ended, grpc-go holds all it received: SendMsg and
// Header read it to its end themselves (readEnd), as RecvMsg would, and
// judge the end at once; what they read is the caller's RecvMsg's to
// return, in order: the messages, kept as their bytes and decoded into
// the caller's messages then, and the end.

// readAhead is what was read of an ended attempt before the caller's
// RecvMsg asked for it.
type readAhead struct {
	msgs  []mem.BufferSlice // messages, as received, not yet returned
	end   error             // the attempt's end, as RecvMsg returns it; nil if not read
	given bool              // RecvMsg has returned the end, or a client stream's answer
}

// aheadPerMsg is what readEnd counts against [Limits].ReplayBuffer for a
// message kept besides its bytes: its place in msgs.
const aheadPerMsg = 24

// pending reports whether RecvMsg has yet to return something read ahead.
func (r *readAhead) pending() bool { return len(r.msgs) > 0 || r.end != nil && !r.given }

// drop frees what was read ahead of an attempt that no caller will read.
func (r *readAhead) drop() {
	for _, m := range r.msgs {
		m.Free()
	}
	*r = readAhead{}
}

// readEnd reads attempt n, which has ended, to its end, as RecvMsg would:
// for a Header that found it ended before its header, or a SendMsg that
// found it ended (io.EOF). It keeps the messages, up to
// [Limits].ReplayBuffer (and one message more), and the end for RecvMsg,
// and judges the end as RecvMsg does: the plugin's own end commits the
// stream; a death re-opens it, and what was read of it is dropped, as the
// caller saw none of it. Past the bound, it stops and leaves the rest and
// the end to RecvMsg, and to SendMsg's evidence. It reports whether the
// stream goes on with a new attempt.
//
// A stream that went on to a new attempt since, or can no longer be
// re-opened, is left to RecvMsg. If a RecvMsg is reading, it reads the
// attempt's end too: readEnd waits for it to settle the attempt rather
// than for RecvMsg to return.
func (s *stream) readEnd(n int) bool {
	s.mu.Lock()
	for {
		if next := s.n != n; next || !s.reopenableLocked() {
			s.mu.Unlock()
			return next
		}
		if !s.reading {
			break
		}
		w := s.settled.wait(s.ctx)
		s.mu.Unlock()
		<-w.Done()
		if s.ctx.Err() != nil {
			return false
		}
		s.mu.Lock()
	}
	s.reading, s.endRead = true, make(chan struct{})
	cs, bound := s.cs, s.p.replayBuffer()
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.reading = false
		close(s.endRead)
		s.endRead = nil
		s.settled.done()
		s.mu.Unlock()
	}()
	var ahead readAhead
	var err error
	for kept := 0; kept <= bound; {
		var m encoded // the wire codec keeps its bytes (wireCodec.Unmarshal)
		if err = cs.RecvMsg(&m); err != nil {
			break
		}
		ahead.msgs = append(ahead.msgs, m.data)
		kept += m.data.Len() + aheadPerMsg
		if s.kind == clientStreaming {
			err = io.EOF // grpc-go read its end with it: the plugin's, with status OK
			break
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.final != nil { // every call returns the verdict
		ahead.drop()
		return false
	}
	s.ahead = ahead
	switch {
	case err == nil: // past the bound: RecvMsg reads on
		return false
	case err == io.EOF: // the plugin ended it, with its trailers
		s.ahead.end = err
		s.overLocked()
		return false
	}
	s.ahead.end = err // pending: the end is not the caller's yet
	s.mu.Unlock()
	err = s.failed(n, err, false)
	s.mu.Lock()
	if s.n != n {
		return true // re-opened: openOn dropped what was read
	}
	if s.final == nil {
		s.ahead.end = err // the plugin's own, as RecvMsg returns it
	}
	return false
}

// recvAheadLocked returns to RecvMsg the next of what was read ahead: a
// message, decoded into m with the caller's codec, or the end, which
// every later RecvMsg returns again, as grpc-go does. mu is held, and
// released.
func (s *stream) recvAheadLocked(m any) error {
	g := s.a.g
	if len(s.ahead.msgs) == 0 {
		err, first := s.ahead.end, !s.ahead.given
		s.ahead.given = true
		if first {
			s.doneLocked()
		}
		s.mu.Unlock()
		if err == io.EOF {
			g.MarkServed()
		}
		return err
	}
	data := s.ahead.msgs[0]
	s.ahead.msgs[0] = nil
	s.ahead.msgs = s.ahead.msgs[1:]
	s.received = true
	s.commitLocked(messageReceived)
	if s.kind == clientStreaming {
		// The stream is over: a client stream's one answer is its end.
		s.ahead.given = true
		s.doneLocked()
	}
	s.mu.Unlock()
	err := s.wire.codec.Unmarshal(data, m)
	data.Free()
	if err != nil {
		err = status.Errorf(codes.Internal, "grpc: failed to unmarshal the received message: %v", err)
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.finalLocked(err)
	}
	g.MarkServed()
	return nil
}
