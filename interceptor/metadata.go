package interceptor

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc/metadata"
)

const (
	// attemptKey is the outgoing metadata key of a retry's attempt count:
	// "1" on the first retry, as go-grpc-middleware's retry sends it. The
	// first attempt does not carry it.
	attemptKey = "x-retry-attempt"
	// CallIDKey is the outgoing metadata key of the call id that every
	// attempt of one call carries, with [WithCallIDs].
	CallIDKey = "x-respawn-call-id"
)

// withAttempt returns ctx for the attempt that follows sent attempts of a
// call: a retry says how many went before it.
func withAttempt(ctx context.Context, sent int) context.Context {
	if sent < 1 {
		return ctx
	}
	return metadata.AppendToOutgoingContext(ctx, attemptKey, strconv.Itoa(sent))
}

// withCallID returns ctx with a fresh call id, unless it carries one.
func withCallID(ctx context.Context) context.Context {
	if md, ok := metadata.FromOutgoingContext(ctx); ok && len(md.Get(CallIDKey)) > 0 {
		return ctx
	}
	return metadata.AppendToOutgoingContext(ctx, CallIDKey, newCallID())
}

// callIDs makes call ids unique in this process, and across processes with
// near certainty: a random prefix of 48 bits drawn once, then a counter of
// 48 bits, 24 hex digits in all. Cheaper than drawing each id (a
// crypto/rand read costs more than the rest of the interceptor), and no
// less unique.
var callIDs struct {
	once   sync.Once
	prefix [6]byte
	n      atomic.Uint64
}

func newCallID() string {
	callIDs.once.Do(func() { _, _ = rand.Read(callIDs.prefix[:]) })
	var b [24]byte
	hex.Encode(b[:12], callIDs.prefix[:])
	n := callIDs.n.Add(1)
	for i := 23; i >= 12; i-- {
		b[i] = "0123456789abcdef"[n&0xf]
		n >>= 4
	}
	return string(b[:])
}
