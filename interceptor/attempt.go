package interceptor

import (
	"io"
	"math"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/grpc-respawn/respawn/redial"
)

// reopen handles err, the failure of the stream's first attempt, in the
// one recovery loop: it returns nil once the stream runs on a new attempt,
// or the error for the caller. A stream not sent, its plugin being gone
// (errGone), has had no attempt yet.
func (s *stream) reopen(err error) error {
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
// stream runs on a new attempt, or the error for the caller. A server
// stream whose caller has received messages goes on with WithResume's
// request, if it has one.
func (s *stream) failed(n int, err error, onSend bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.final != nil:
		return s.final
	case s.over:
		return err // the plugin's own end, as grpc-go returns it again
	case s.n != n:
		return s.resentLocked(onSend) // already re-opened, with what was sent replayed
	case s.h.Closed():
		return s.finalLocked(redial.ErrClosed)
	}
	a := s.a
	if !onSend { // RecvMsg failed: the attempt has ended, its trailer is known
		a.trailer = s.cs
	}
	resumed := !onSend && s.resumeLocked()
	o, jerr := s.p.judgeAttempt(s.ctx, s.h, a, err)
	if resumed {
		// Its plugin delivered messages first: the request did not kill it.
		o.killed = false
	}
	return s.afterLocked(o, err, jerr, onSend)
}

// resumeLocked makes a server stream whose caller has received messages
// go on with the request WithResume makes from the last one: the stream
// is no longer committed, its log holds that request, and it is a new call,
// with its own budget of attempts and of deaths. It reports whether it did.
func (s *stream) resumeLocked() bool {
	if s.resume == nil || !s.received || s.wire == nil {
		return false
	}
	next, ok := s.resume(s.req, s.last)
	if !ok {
		return false
	}
	data, err := s.wire.codec.Marshal(next)
	if err != nil {
		return false
	}
	s.log.drop()
	s.log.add(data, math.MaxInt)
	data.Free()
	s.received, s.committed, s.resumed = false, false, true
	s.r = &retrier{p: s.p, h: s.h, method: s.method, req: s.req, attempt: 1}
	return true
}

// lost handles the end of attempt n under SendMsg (io.EOF), which carries
// no status: it returns nil once the stream runs on a new attempt, io.EOF
// if RecvMsg is to read how the stream ended, or the error that ends it.
// Only a stream that could be replayed needs the evidence; it is weighed
// without mu, and no longer than until RecvMsg settles attempt n: it reads
// the answer or the status, or re-opens the stream. A lost connection
// whose plugin lives and takes a new one was drained: the stream is
// re-opened on the same plugin. An ended attempt has its status at hand,
// and the trailer that says whose it is: it is read to its end (readEnd),
// its messages kept for RecvMsg, and judged as RecvMsg would, with no wait
// for a live plugin's own end; only what is more than readEnd keeps is
// left to the evidence.
func (s *stream) lost(n int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err, ok := s.lostLocked(n); ok {
		return err
	}
	if !s.closeSent { // a SendMsg after CloseSend found its side closed, not the attempt ended
		cs, wire := s.cs, s.wire != nil
		s.mu.Unlock()
		md, err := cs.Header() // the attempt has ended: it returns at once
		if err == nil && (md == nil || wire) {
			s.readEnd(n)
		}
		s.mu.Lock()
		if err, ok := s.lostLocked(n); ok {
			return err
		}
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
func (s *stream) lostLocked(n int) (err error, ok bool) {
	switch {
	case s.final != nil:
		return s.final, true
	case s.n != n:
		return s.resentLocked(true), true // re-opened, with m replayed
	case !(s.replay || s.led) || !s.reopenableLocked():
		return io.EOF, true // no replay: RecvMsg reads the status, and judges a death
	case s.h.Closed():
		return s.finalLocked(redial.ErrClosed), true
	}
	return nil, false
}

// errStreamEnded stands for the failure of a SendMsg that found its stream
// ended, which says nothing of why: the evidence decides.
var errStreamEnded = status.Error(codes.Unavailable, "interceptor: the stream ended under SendMsg")

// afterLocked acts on o, the verdict on the current attempt's failure err
// (jerr as judgeAttempt reports it), in the one recovery loop shared with
// unary calls: it re-opens the stream while that is safe, and returns nil
// once it runs on a new attempt, or the error for the caller. onSend: err
// is SendMsg's, and RecvMsg reads the plugin's status.
func (s *stream) afterLocked(o outcome, err, jerr error, onSend bool) error {
	if o.class == notConnectionFault {
		if !onSend {
			s.overLocked()
			err = s.fromLedgerLocked(err)
		}
		return err
	}
	if s.r == nil {
		s.r = &retrier{p: s.p, h: s.h, method: s.method, req: s.req, attempt: s.n, ledger: s.led}
		if s.led {
			s.r.held, s.sent.held = s.sent.held, nil
		}
	}
	if s.led {
		s.sent.cause = jerr
	}
	if err = s.r.recover(s.ctx, s.opts, s.a, o, jerr, s.standingLocked(), s.openOn); err == nil {
		return s.resentLocked(onSend)
	}
	// No attempt runs: none was made, or the last one failed to open
	// (the caller's ctx may have ended as it opened). None is left for
	// RecvMsg to read how the stream ended: err is the stream's end.
	return s.finalLocked(err)
}

// standingLocked says where the stream stands: it may be sent again until
// it commits, if it is replayed or has sent nothing. After that, a server
// stream's caller has part of the answer if it received messages; a client
// or bidirectional stream may have run.
func (s *stream) standingLocked() standing {
	switch {
	case s.led:
		// Its ledger id answers, whatever it received or could not keep.
		return standing{again: true}
	case !s.committed && (s.replay || s.nsent == 0 && !s.closeSent):
		return standing{again: true, resumed: s.resumed}
	case s.kind == serverStreaming:
		return standing{received: s.received}
	}
	why := reasonNotIdempotent
	if s.replay {
		why = reasonCommitted
	}
	return standing{unsure: true, sent: s.nsent > 0, why: why}
}

// reopenableLocked reports whether a death of the stream's plugin would
// re-open it: no verdict, no end, and nothing sent that is not kept.
func (s *stream) reopenableLocked() bool {
	return s.final == nil && !s.over && s.standingLocked().again
}

// openOn opens attempt n+1 on g and sends again what was sent; mu is held.
// It returns the attempt, and its error if that fails.
func (s *stream) openOn(g *redial.Generation) (attempt, error) {
	s.endLocked()
	ctx := withAttempt(s.ctx, s.r.attempt-1)
	if s.led {
		var err error
		if ctx, err = s.ledgerAttemptLocked(ctx, g); err != nil {
			return attempt{g: g}, err
		}
	}
	actx, cancel := attemptContext(ctx, g)
	s.a, s.cancel, s.n = attempt{g: g, actx: actx, pr: new(peer.Peer)}, cancel, s.n+1
	s.received = false
	s.ahead.drop() // what the caller has not seen of the attempt before
	s.settled.done()
	cs, err := s.streamer(actx, s.desc, g.ClientConn(), s.method, retryOptions(s.opts, s.a.pr)...)
	if err == nil {
		err = s.replayLocked(cs)
	}
	if err != nil {
		return s.a, err
	}
	s.cs = cs
	if lc := s.lctx.Load(); lc != nil {
		lc.attempt(cs)
	}
	s.settled.done()
	return s.a, nil
}

// commitLocked commits the stream if e does (see [commitTable]): it drops
// the replay log, and the call will not be sent again.
func (s *stream) commitLocked(e streamEvent) {
	if !commits(s.desc, e) || s.led && (e == headerReceived || e == contextTaken) {
		// A ledgered stream's header says its handler began: the ledger
		// answers a re-open, which may need the log yet.
		return
	}
	s.committed = true
	s.log.drop()
	s.settled.done()
}

// overLocked records that the plugin, or the caller's ctx, ended the
// stream: what RecvMsg returned is its end.
func (s *stream) overLocked() {
	s.commitLocked(endedByPlugin)
	s.over = true
	s.doneLocked()
}

// finalLocked makes err respawn's verdict on the stream, returned by every
// later call, and ends the stream.
func (s *stream) finalLocked(err error) error {
	s.final = err
	s.ahead.drop()
	s.doneLocked()
	return err
}

// endLocked ends the current attempt's ctx.
func (s *stream) endLocked() {
	if s.cancel != nil {
		s.cancel()
		s.cancel = nil
	}
}

// doneLocked records that the stream's end is the caller's: it ends the
// current attempt and the stream's Context. An end read ahead is the
// caller's once RecvMsg returns it.
func (s *stream) doneLocked() {
	s.endLocked()
	if s.ahead.pending() {
		s.settled.done()
		return
	}
	if s.led && !s.done {
		s.releaseLedgersLocked()
		s.sent.stop()
	}
	s.done = true
	s.settled.done()
	if lc := s.lctx.Load(); lc != nil {
		lc.cancel()
	}
}

// recvLocked waits for a Header or SendMsg that reads the current
// attempt's end (readEnd); mu is held, and released while it waits.
// RecvMsg then says, in reading, whether it reads an attempt that readEnd
// might.
func (s *stream) recvLocked() {
	for s.endRead != nil {
		w := s.endRead
		s.mu.Unlock()
		<-w
		s.mu.Lock()
	}
}

// recvDone ends RecvMsg's read.
func (s *stream) recvDone() {
	s.mu.Lock()
	s.reading = false
	s.mu.Unlock()
}
