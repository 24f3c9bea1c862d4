package interceptor

import (
	"context"
	"io"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

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
// [ErrOutcomeUnknown], but for a client stream kept in the plugins'
// ledgers ([WithLedger]), which is re-opened with its ledger id. Across a re-open the stream keeps one Context
// (taking it does not commit the stream) and gives one verdict (see the
// package documentation, "Streams"). A stream that may be re-opened has its
// messages encoded by respawn, with the call's codec, and sends those bytes
// through a codec that passes them on (grpc.ForceCodecV2): an interceptor
// chained after respawn's, between it and grpc-go, sees them encoded, as
// it does what a SendMsg reads of an ended attempt for RecvMsg.
func (p *Policy) StreamClientInterceptor(h redial.Handle) grpc.StreamClientInterceptor {
	if noHandle(h) {
		return failStream
	}
	return func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		if p.opts.callIDs {
			ctx = withCallID(ctx)
		}
		led := p.opts.ledger && p.ledgeredStream(desc, method, opts)
		if led {
			ctx = withLedgerID(ctx)
		} else if p.opts.ledger {
			ctx = withoutLedgerKeys(ctx) // only client streams are kept in ledgers
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
		s := newStream(p, h, ctx, desc, method, streamer, opts, g, led)
		err := errGone
		if !g.Gone() {
			s.holdFirst(g)
			s.cs, err = streamer(ctx, desc, g.ClientConn(), method, s.opts...)
		}
		if err != nil {
			if err = s.reopen(err); err != nil {
				return nil, err
			}
		}
		return s, nil
	}
}

// stream is every stream the interceptor returns: server, client and
// bidirectional. Until it commits (see [commitTable]), a death of its
// plugin re-opens it on the successor, where what it sent is sent again
// from its replay log, if the method allows; after that, a death ends it
// with a verdict ([ErrOutcomeUnknown], [ErrStreamBroken]), given once:
// every later call returns it.
//
// grpc-go allows one goroutine in SendMsg and another in RecvMsg at once.
// Each attempt has a number, under mu; an operation runs on attempt n, and
// whichever side sees attempt n fail first judges the failure, once, and
// re-opens the stream as attempt n+1 (failed); the other, finding n+1,
// goes on with it. A SendMsg that finds attempt n ended (io.EOF) reads it
// to its end and judges that (lost); past what it keeps, it weighs the
// evidence without mu, so that RecvMsg can read meanwhile, and stops as
// soon as RecvMsg settles attempt n.
//
// grpc-go allows one reader of an attempt: RecvMsg, or a Header or SendMsg
// that reads an ended attempt to its end for RecvMsg (readEnd). reading
// says one reads the current attempt; readEnd's endRead, closed when it is
// done, is waited for by RecvMsg; readEnd waits for a RecvMsg reading to
// settle the attempt. RecvMsg claims only an attempt that readEnd might
// read, one that may yet be re-opened (a ledgered stream's, committed or
// not); any other it reads without claiming.
type stream struct {
	// The call, as the interceptor was given it.
	p        *Policy
	h        redial.Handle
	ctx      context.Context
	desc     *grpc.StreamDesc
	method   string
	streamer grpc.Streamer
	opts     []grpc.CallOption
	kind     streamKind
	// replay: what was sent may be sent again: a server stream's request,
	// or what an idempotent client or bidirectional stream sends.
	replay bool
	// led: a client stream kept in the plugins' ledgers (WithLedger): a
	// death re-opens it with its ledger id, whatever it received.
	led bool
	// resume is WithResume's function for a server stream: it makes the
	// request that continues the stream from the last message received,
	// which only the RecvMsg goroutine writes.
	resume func(req, last any) (any, bool)
	last   any
	// wire, if the stream keeps what it sends, encodes its messages, and
	// its attempts send them as encoded; out is the message SendMsg sends.
	wire   *wireCodec
	out    encoded
	optBuf [8]grpc.CallOption // opts' backing array, if it fits

	mu        sync.Mutex
	r         *retrier // its recovery, from its first failure on
	a         attempt
	cs        grpc.ClientStream
	cancel    context.CancelFunc // ends a's ctx; nil for the first attempt
	n         int                // the attempt's number
	log       replayLog          // what a new attempt is sent again
	req       any                // a server stream's request, for WithIdempotencyFunc and WithResume
	nsent     int                // messages sent
	closeSent bool
	received  bool  // the current attempt delivered a message
	resumed   bool  // the caller has messages of an earlier attempt (WithResume)
	committed bool  // never re-opened again, but by WithResume
	over      bool  // the plugin (or the caller's ctx) ended the stream: RecvMsg has its status
	final     error // respawn's verdict on the stream: every later call returns it
	done      bool  // the stream's end was returned to the caller

	settled settle // waited on by a call that found the attempt ended
	reading bool
	endRead chan struct{}
	ahead   readAhead                     // what Header or SendMsg read of an ended attempt
	lctx    atomic.Pointer[streamContext] // the Context handed out while the stream could be re-opened

	sent *ledgerSent // a ledgered stream's record of what it sent; nil if not led
}

var _ grpc.ClientStream = (*stream)(nil)

// newStream returns the stream of a call whose first attempt goes to g;
// the caller opens it, with s.opts.
func newStream(p *Policy, h redial.Handle, ctx context.Context, desc *grpc.StreamDesc, method string, streamer grpc.Streamer, opts []grpc.CallOption, g *redial.Generation, led bool) *stream {
	s := &stream{p: p, h: h, ctx: ctx, desc: desc, method: method, streamer: streamer, kind: kindOf(desc), a: attempt{g: g}, n: 1, led: led}
	var extra []grpc.CallOption
	if s.kind == serverStreaming {
		s.replay = true
		if p.opts.resume != nil { // no map lookup without WithResume
			if f := p.opts.resume[method]; f != nil {
				// The host says how to continue it: it is safe to re-open.
				s.resume, extra = f, []grpc.CallOption{idempotentOption{ok: true}}
			}
		}
	} else {
		s.replay = p.idempotent(method, nil, opts)
	}
	if led {
		s.sent = &ledgerSent{}
		// A caller that ends its ctx without reading the stream's end
		// can no longer have it retried: its ledgers are released then.
		s.sent.stop = context.AfterFunc(ctx, s.releaseLedgers)
	} else if !s.replay {
		s.opts = opts
		return s
	}
	s.wire = wireFor(opts)
	all := append(s.optBuf[:0], opts...)
	if s.wire != nil {
		all = append(all, s.wire.opt)
	}
	s.opts = append(all, extra...)
	return s
}

// SendMsg sends m, encoded once, and keeps its bytes for a replay until
// the stream commits. If the stream's plugin died, it is re-opened and m's
// bytes sent there.
func (s *stream) SendMsg(m any) error {
	msg, data := s.encode(m)
	s.mu.Lock()
	if s.final != nil || s.led && s.sent.sealed {
		s.mu.Unlock()
		if s.final != nil {
			return s.final
		}
		return io.EOF // a ledger retry that could not carry it: RecvMsg reads its answer
	}
	if s.led {
		s.sent.add(data)
	}
	if (s.replay || s.led) && !s.committed && !s.keepLocked(m, data) {
		s.keepFirstLocked(data)
		s.commitLocked(bufferFull)
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

// RecvMsg receives a message; a message commits the stream, and so does
// its end. It is the reader of an attempt that readEnd might read: one
// that may yet be re-opened (a ledgered stream's, committed or not); it
// reads any other without claiming it.
func (s *stream) RecvMsg(m any) error {
	for {
		s.mu.Lock()
		s.recvLocked()
		if s.final != nil {
			s.reading = false
			s.mu.Unlock()
			return s.final
		}
		if len(s.ahead.msgs) > 0 || s.ahead.end != nil {
			return s.recvAheadLocked(m)
		}
		cs, n, g, committed := s.cs, s.n, s.a.g, s.committed
		s.reading = s.reopenableLocked()
		s.mu.Unlock()
		err := cs.RecvMsg(m)
		if err == nil && committed && s.kind != clientStreaming {
			// A committed stream is never re-opened (but by WithResume,
			// on its reader's goroutine): cs and g stay.
			g.MarkServed()
			if s.resume != nil {
				s.last = m
			}
			return nil
		}
		if err == nil || err == io.EOF {
			s.mu.Lock()
			s.reading = false
			if err == nil {
				s.received = true
				s.commitLocked(messageReceived)
			}
			g = s.a.g
			if err == io.EOF || s.kind == clientStreaming {
				// The stream is over: a client stream's one answer is its
				// end, and the plugin's, which nothing re-opens.
				s.overLocked()
			}
			s.mu.Unlock()
			g.MarkServed()
			if err == nil && s.resume != nil {
				s.last = m
			}
			return err
		}
		if err = s.failed(n, err, false); err != nil {
			s.recvDone()
			return err
		}
	}
}

// Header returns the header metadata, which commits a stream of the kinds
// that a header commits. An attempt that ended before its header, while
// the stream can still be re-opened, is judged here: if its plugin died,
// the stream is re-opened and the header is the successor's.
func (s *stream) Header() (metadata.MD, error) {
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
		if !s.readEnd(n) {
			return nil, nil
		}
	}
}

// Trailer returns the current attempt's trailer metadata.
func (s *stream) Trailer() metadata.MD {
	s.mu.Lock()
	cs := s.cs
	s.mu.Unlock()
	return cs.Trailer()
}

// CloseSend closes the sending side, and remembers it for a replay.
func (s *stream) CloseSend() error {
	s.mu.Lock()
	s.closeSent = true
	cs, sealed := s.cs, s.led && s.sent.sealed
	s.mu.Unlock()
	if sealed {
		return nil // closed by the ledger retry already
	}
	return cs.CloseSend()
}

// Context returns the stream's context. It lives as long as the stream,
// not as one attempt: a re-open on a new plugin does not end it. It ends
// when the stream's end has been returned to the caller, or the caller's
// ctx ends. Its values are the current attempt's, as grpc-go's stream
// Context gives them (the plugin's peer, say). A stream that no attempt
// can follow gives its attempt's own.
func (s *stream) Context() context.Context {
	if c := s.lctx.Load(); c != nil {
		return c
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.lctx.Load(); c != nil {
		return c
	}
	s.commitLocked(contextTaken)
	if !s.ahead.pending() && (s.done || !s.reopenableLocked() && !(s.resume != nil && s.received)) {
		return s.cs.Context()
	}
	lc := newStreamContext(s.ctx, s.cs)
	s.lctx.Store(lc)
	return lc
}
