package ledger

import (
	"context"

	"google.golang.org/grpc/metadata"

	"github.com/grpc-respawn/respawn/internal/ledgerwire"
)

// Config configures a plugin's ledger. The zero Config is the defaults.
// [ServerOptions] reads it once and keeps a copy, so changing it (or its
// Resolvers map) afterwards changes nothing, and one Config may be passed
// to ServerOptions from many goroutines.
type Config struct {
	// MaxResponse bounds the responses the ledger keeps, in encoded bytes:
	// the record of a call whose response is larger keeps only its status,
	// and a retry of that call after its plugin died fails with
	// codes.DataLoss (the call completed once; its response is gone).
	// 0: 1 MiB; negative: keep no responses.
	MaxResponse int
	// Resolvers, by full method name ("/pkg.Service/Method"): for a call
	// interrupted in its handler by its plugin's death, tell from the
	// plugin's own state whether it took effect. A resolver that knows
	// returns the call's response and true (one that finds the call did not
	// take effect may perform it now and return its response); the answer
	// is recorded as the call's completion. One that cannot tell returns
	// false, and the retry fails as interrupted (codes.Unknown). Resolvers
	// run concurrently, in the retry's ctx. nil: none.
	Resolvers map[string]func(ctx context.Context, method, callID string, req any) (resp any, known bool)
	// StreamResolvers, by full method name: for a client stream
	// interrupted in its handler by its plugin's death (an upload cut while
	// its chunks arrived, or while it stored them), tell from the plugin's
	// own state whether it took effect (see [Upload]). A resolver's Done
	// answer is recorded as the stream's completion. Resolvers run
	// concurrently, in the retry's ctx. nil: none.
	StreamResolvers map[string]StreamResolver
	// Sync makes every record flushed to the disk before the call goes on
	// (msync(2) of its pages on Linux, fsync(2) elsewhere): survives power
	// loss, costs a disk flush. false: a record survives the
	// plugin's process (SIGKILL, OOM kill) in the page cache, not a power
	// loss.
	Sync bool
}

const defaultMaxResponse = 1 << 20

// config is a Config normalised and copied.
type config struct {
	maxResponse int // <0: keep none
	resolvers   map[string]func(ctx context.Context, method, callID string, req any) (any, bool)
	streams     map[string]StreamResolver
	sync        bool
}

func (c Config) normalise() config {
	n := config{maxResponse: c.MaxResponse, sync: c.Sync}
	switch {
	case n.maxResponse == 0:
		n.maxResponse = defaultMaxResponse
	case n.maxResponse < 0:
		n.maxResponse = -1
	}
	if len(c.Resolvers) > 0 {
		n.resolvers = make(map[string]func(context.Context, string, string, any) (any, bool), len(c.Resolvers))
		for m, r := range c.Resolvers {
			if r != nil {
				n.resolvers[m] = r
			}
		}
	}
	if len(c.StreamResolvers) > 0 {
		n.streams = make(map[string]StreamResolver, len(c.StreamResolvers))
		for m, r := range c.StreamResolvers {
			if r != nil {
				n.streams[m] = r
			}
		}
	}
	return n
}

// A StreamResolver tells whether a client stream that was in its handler
// when its plugin died took effect, from what the plugin stored: for an
// upload, whether an object is stored with u.CallID (which the handler
// stores with it, from [CallID]). It returns Done and the stream's
// response if it took effect, NotDone if it certainly did not, and
// Unresolved if it cannot tell. Unresolved is the only safe answer when
// what it finds does not match u: NotDone runs the stream again.
type StreamResolver func(ctx context.Context, method string, u Upload) (resp any, r Resolution)

// Upload is what a [StreamResolver] is given about a client stream
// interrupted in its handler: what the host sent on it before its plugin
// died.
type Upload struct {
	// CallID is the stream's ledger id, the same on every attempt.
	CallID string
	// First is the first request message, decoded as the method's request
	// type (where an upload names its object), or nil if the host sent
	// none or its type is not registered in this process.
	First any
	// Digest is the CRC-32C (Castagnoli) of the encoded bytes of the
	// messages the host sent, one after the other, as its codec made them
	// (gRPC's 5-byte message prefixes excluded); Length is their total
	// length. A handler that stores them computes the same by encoding
	// each message it receives again: with Go's proto package and messages
	// without maps or unknown fields, the bytes are the host's. When
	// encodings may differ, compare by CallID alone.
	Digest uint32
	Length int64
	// Whole reports whether the host sends all of it again: a NotDone
	// stream then runs now, from the messages the host sends. Otherwise
	// (the upload was larger than the host's replay buffer) NotDone fails
	// it, unrun, and the host reports that it could not be sent again.
	Whole bool
}

// Resolution is a [StreamResolver]'s answer. The zero value is
// Unresolved.
type Resolution int

const (
	// Unresolved: the resolver cannot tell; the retry fails as interrupted
	// in its handler.
	Unresolved Resolution = iota
	// NotDone: the stream did not take effect; it runs now, if the host
	// sends all of it again.
	NotDone
	// Done: the stream took effect; the resolver's resp is its response.
	Done
)

// CallID returns the ledger id of the call whose server ctx is ctx, "" for
// a call the ledger does not record. A handler that keeps its own record of
// what it did (a row, a line in a file) stores this id with it, so that a
// resolver, which is given the id of an interrupted call, can tell whether
// the call took effect. It is safe for concurrent use.
func CallID(ctx context.Context) string {
	if v := metadata.ValueFromIncomingContext(ctx, ledgerwire.IDKey); len(v) > 0 && len(v[0]) <= ledgerwire.MaxCallID {
		return v[0]
	}
	return ""
}
