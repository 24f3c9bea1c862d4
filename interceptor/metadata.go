package interceptor

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strconv"

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
	var b [12]byte
	_, _ = rand.Read(b[:])
	return metadata.AppendToOutgoingContext(ctx, CallIDKey, hex.EncodeToString(b[:]))
}
