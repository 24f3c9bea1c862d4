package interceptor

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"reflect"
	"strconv"

	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
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

// replayCost is what keeping m for a replay costs, in bytes: what grpc-go
// charges its own retry buffer for it (the 5-byte frame header and the
// encoded message), and what holding it takes besides — its struct, which
// the caller would otherwise let go, and its slot in the buffer, twice over
// for the spare capacity of a growing slice — so that messages that encode
// to nothing still fill the buffer. A message that is no proto.Message has
// no known size: it costs more than buffer.
func replayCost(m any, buffer int) int {
	pm, ok := m.(proto.Message)
	if !ok {
		return buffer + 1
	}
	t := reflect.TypeOf(m)
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	const frameHeader, slot = 5, 2 * 16
	return frameHeader + proto.Size(pm) + int(t.Size()) + slot
}
