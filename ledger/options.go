package ledger

import (
	"context"

	"google.golang.org/grpc/metadata"

	"github.com/grpc-respawn/respawn/internal/ledgerwire"
)

// Config configures a plugin's ledger. The zero Config is the defaults.
// [ServerOption] reads it once and keeps a copy, so changing it (or its
// Resolvers map) afterwards changes nothing, and one Config may be passed
// to ServerOption from many goroutines.
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
	// Sync makes every record fsync'd before the call goes on: survives
	// power loss, costs a disk flush. false: a record survives the
	// plugin's process (SIGKILL, OOM kill) in the page cache, not a power
	// loss.
	Sync bool
}

const defaultMaxResponse = 1 << 20

// config is a Config normalised and copied.
type config struct {
	maxResponse int // <0: keep none
	resolvers   map[string]func(ctx context.Context, method, callID string, req any) (any, bool)
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
	return n
}

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
