package interceptor

import (
	"context"
	"sync/atomic"

	"google.golang.org/grpc"
)

// streamContext is the Context of a stream that may be re-opened on a new
// plugin: it ends with the stream, not with an attempt. Its values are
// those of the current attempt's Context, as grpc-go's stream gives them:
// the caller's, under what grpc-go adds (the plugin's peer, over a peer the
// caller's ctx carries). It takes no lock of the stream's, so that it
// answers while the stream is being re-opened.
type streamContext struct {
	context.Context // the caller's ctx, until the stream ends
	cancel          context.CancelFunc
	first           grpc.ClientStream                 // the attempt current when it was made
	cs              atomic.Pointer[grpc.ClientStream] // the current attempt's stream
}

// newStreamContext returns the Context of a stream on ctx whose current
// attempt is cs.
func newStreamContext(ctx context.Context, cs grpc.ClientStream) *streamContext {
	c := &streamContext{first: cs}
	c.cs.Store(&c.first)
	c.Context, c.cancel = context.WithCancel(ctx)
	return c
}

// attempt records cs as the current attempt's stream.
func (c *streamContext) attempt(cs grpc.ClientStream) { c.cs.Store(&cs) }

// Value returns the value for key of the current attempt's Context, which
// holds the caller's ctx's; but c's own cancellation, which a context
// gives as its value for the context package's key (context.Cause, and a
// child's WithCancel, look it up), is c's, not the attempt's.
func (c *streamContext) Value(key any) any {
	if v := c.Context.Value(key); v == any(c.Context) {
		return v
	}
	return (*c.cs.Load()).Context().Value(key)
}

// settle is the wait of a call that found a stream's attempt ended for the
// goroutine that reads the stream to settle it: re-open the stream, or
// take its answer or end. The stream's mu guards it; the zero value has no
// one waiting.
type settle struct {
	ctx  context.Context
	wake context.CancelFunc
}

// wait returns a ctx that ends when the attempt is settled or parent ends.
func (w *settle) wait(parent context.Context) context.Context {
	if w.ctx == nil {
		w.ctx, w.wake = context.WithCancel(parent)
	}
	return w.ctx
}

// done ends the wait: the stream's state says what follows.
func (w *settle) done() {
	if w.wake != nil {
		w.wake()
		*w = settle{}
	}
}
