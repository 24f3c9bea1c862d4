package interceptor

import (
	"context"
	"io"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/grpc-respawn/respawn/redial"
)

// streamCore is what every stream the interceptor gives back keeps: the
// call, and under mu its current attempt's grpc-go stream, the replay log
// of the bytes that a new attempt is sent again, the Context handed out while the
// stream could be re-opened, the wait of a call that found the attempt
// ended, and who reads the attempt.
//
// grpc-go allows one reader of a stream: RecvMsg, or a Header that reads
// the status of an attempt that ended before its header. reading says one
// of them reads the current attempt; a Header that reads has headerRead,
// closed when it is done, and a RecvMsg waits for it. A Header that finds
// RecvMsg reading waits for it to settle the attempt instead. A stream
// whose current attempt has answered can no longer end before its header,
// so its RecvMsg claims nothing: the hot path takes no lock of its own.
type streamCore struct {
	// The call, as the interceptor was given it.
	p        *Policy
	h        redial.Handle
	ctx      context.Context
	desc     *grpc.StreamDesc
	method   string
	streamer grpc.Streamer
	opts     []grpc.CallOption
	r        *retrier // its recovery, from its first failure on

	// wire, if the stream keeps what it sends, encodes its messages, and
	// its attempts send them as encoded; out is the message SendMsg sends.
	wire   *wireCodec
	out    encoded
	optBuf [8]grpc.CallOption // opts' backing array, if it fits

	mu         sync.Mutex
	cs         grpc.ClientStream
	log        replayLog // what a new attempt is sent again
	closeSent  bool
	done       bool   // the stream's end was returned to the caller
	settled    settle // waited on by a call that found the attempt ended
	reading    bool
	headerRead chan struct{}
	lctx       atomic.Pointer[streamContext] // the Context handed out while the stream could be re-opened
}

// current returns the current attempt's stream.
func (c *streamCore) current() grpc.ClientStream {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cs
}

// Trailer returns the current attempt's trailer metadata.
func (c *streamCore) Trailer() metadata.MD { return c.current().Trailer() }

// CloseSend closes the sending side, and remembers it for a replay.
func (c *streamCore) CloseSend() error {
	c.mu.Lock()
	c.closeSent = true
	cs := c.cs
	c.mu.Unlock()
	return cs.CloseSend()
}

// keep makes the stream keep what it sends, encoded by wire, if wire is
// not nil: its attempts are opened with opts and wire's codec, and extra.
func (c *streamCore) keep(wire *wireCodec, opts []grpc.CallOption, extra ...grpc.CallOption) {
	if wire == nil && len(extra) == 0 {
		c.opts = opts
		return
	}
	c.wire = wire
	all := append(c.optBuf[:0], opts...)
	if wire != nil {
		all = append(all, wire.opt)
	}
	c.opts = append(all, extra...)
}

// encode encodes m once, for every attempt, if the stream keeps what it
// sends: it returns what to send for m, and m's bytes (nil if not encoded:
// the stream keeps nothing, or the codec failed, which grpc-go reports).
// One goroutine at a time sends, as grpc-go requires: out is its own.
func (c *streamCore) encode(m any) (any, mem.BufferSlice) {
	if c.wire == nil {
		return m, nil
	}
	data, err := c.wire.codec.Marshal(m)
	if err != nil {
		return m, nil
	}
	c.out.data = data
	return &c.out, data
}

// dropSentLocked empties the replay log: nothing is sent again.
func (c *streamCore) dropSentLocked() { c.log.drop() }

// replayLocked sends the sent log again on cs, a new attempt's stream, and
// closes its sending side if the caller did. A new attempt that ends under
// the replay (io.EOF) is left to RecvMsg: its plugin answered and closed
// the stream, or died, and RecvMsg reads which.
func (c *streamCore) replayLocked(cs grpc.ClientStream) error {
	var err error
	for i := 0; err == nil && i < c.log.len(); i++ {
		err = cs.SendMsg(c.log.message(i))
	}
	if err == nil && c.closeSent {
		err = cs.CloseSend()
	}
	if err == io.EOF {
		return nil
	}
	return err
}

// attemptLocked makes cs the current attempt's stream.
func (c *streamCore) attemptLocked(cs grpc.ClientStream) {
	c.cs = cs
	if lc := c.lctx.Load(); lc != nil {
		lc.attempt(cs)
	}
	c.settled.done()
}

// doneLocked records that the stream's end is the caller's, and ends the
// stream's Context.
func (c *streamCore) doneLocked() {
	c.done = true
	c.settled.done()
	if lc := c.lctx.Load(); lc != nil {
		lc.cancel()
	}
}

// contextLocked is the stream's Context on the caller's ctx. It lives as
// long as the stream, not as one attempt: a re-open on a new plugin does
// not end it. It ends when the stream's end has been returned to the
// caller, or ctx ends. Its values are the current attempt's, as grpc-go's
// stream Context gives them (the plugin's peer, say). last: no attempt
// follows the current one, whose Context is the stream's.
func (c *streamCore) contextLocked(ctx context.Context, last bool) context.Context {
	if lc := c.lctx.Load(); lc != nil {
		return lc
	}
	if last {
		return c.cs.Context()
	}
	lc := newStreamContext(ctx, c.cs)
	c.lctx.Store(lc)
	return lc
}

// recvLocked waits for a Header that reads the current attempt; mu is
// held, and released while it waits. RecvMsg then says, in reading,
// whether it reads an attempt that a Header might.
func (c *streamCore) recvLocked() {
	for c.headerRead != nil {
		w := c.headerRead
		c.mu.Unlock()
		<-w
		c.mu.Lock()
	}
}

// headerLocked makes a Header the reader of the current attempt, unless
// RecvMsg reads it; mu is held.
func (c *streamCore) headerLocked() bool {
	if c.reading {
		return false
	}
	c.reading, c.headerRead = true, make(chan struct{})
	return true
}

// headerDone ends the read of a Header that headerLocked made the reader.
func (c *streamCore) headerDone() {
	c.mu.Lock()
	c.reading = false
	close(c.headerRead)
	c.headerRead = nil
	c.settled.done()
	c.mu.Unlock()
}

// recvDone ends RecvMsg's read.
func (c *streamCore) recvDone() {
	c.mu.Lock()
	c.reading = false
	c.mu.Unlock()
}

// headerLost handles an attempt that ended before its header, which a
// Header found: it reports whether the stream goes on with a new attempt.
// state says, under mu, whether the stream went on to a new attempt since
// (next), and whether that attempt is current and the stream could still
// be re-opened (open): if not, what it says decides, and RecvMsg reads
// the status. If a RecvMsg is reading, it reads the attempt's end too:
// Header waits for it to settle the attempt rather than for RecvMsg to
// return. Otherwise Header reads the status and hands it to end, which
// reports whether the stream goes on; grpc-go returns it again to the
// caller's RecvMsg.
func (c *streamCore) headerLost(ctx context.Context, state func() (next, open bool), end func(error) bool) bool {
	c.mu.Lock()
	for {
		if next, open := state(); !open {
			c.mu.Unlock()
			return next
		}
		if c.headerLocked() {
			break
		}
		w := c.settled.wait(ctx)
		c.mu.Unlock()
		<-w.Done()
		if ctx.Err() != nil {
			return false
		}
		c.mu.Lock()
	}
	cs := c.cs
	c.mu.Unlock()
	defer c.headerDone()
	// No header came, so no message can: this reads the status only.
	return end(cs.RecvMsg(new(emptypb.Empty)))
}
