package interceptor

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"strings"
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
// less unique. The ids are formatted idsPerBlock at a time, into one
// string that each id is a slice of: one allocation per idsPerBlock ids,
// and an id that is kept keeps its block's 1.5 KiB.
var callIDs struct {
	once   sync.Once
	prefix [12]byte // hex
	n      atomic.Uint64
	block  atomic.Pointer[idBlock]
}

const (
	callIDLen   = 24
	idsPerBlock = 64
)

// idBlock is idsPerBlock call ids, of consecutive counts, given out in
// order.
type idBlock struct {
	ids  string
	next atomic.Uint32 // the index of the next id to give
}

func newCallID() string {
	if b := callIDs.block.Load(); b != nil {
		if i := b.next.Add(1) - 1; i < idsPerBlock {
			return b.ids[i*callIDLen : (i+1)*callIDLen]
		}
	}
	// The block is used up, or there is none yet: this call makes the next
	// one and takes its first id. Calls that find the block used up at the
	// same time each make one, of counts of its own; the last stored is
	// used, the others' other ids never are.
	b := newIDBlock()
	b.next.Store(1)
	callIDs.block.Store(b)
	return b.ids[:callIDLen]
}

// newIDBlock formats the next idsPerBlock call ids.
func newIDBlock() *idBlock {
	callIDs.once.Do(func() {
		var p [6]byte
		_, _ = rand.Read(p[:])
		hex.Encode(callIDs.prefix[:], p[:])
	})
	last := callIDs.n.Add(idsPerBlock)
	var ids strings.Builder
	ids.Grow(idsPerBlock * callIDLen)
	for n := last - idsPerBlock + 1; n <= last; n++ {
		ids.Write(callIDs.prefix[:])
		var digits [12]byte
		for i, c := 11, n; i >= 0; i-- {
			digits[i] = "0123456789abcdef"[c&0xf]
			c >>= 4
		}
		ids.Write(digits[:])
	}
	return &idBlock{ids: ids.String()}
}
