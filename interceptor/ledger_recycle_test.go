package interceptor_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/grpc-respawn/respawn/interceptor"
	"github.com/grpc-respawn/respawn/internal/ledgerwire"
	"github.com/grpc-respawn/respawn/internal/respawntest"
	"github.com/grpc-respawn/respawn/internal/testpb"
	"github.com/grpc-respawn/respawn/redial"
)

// TestLedgerRecycledBySize: a plugin whose ledger outgrows Recycle.Ledger
// is replaced by a planned rotation, which fails no call, so that a
// long-lived plugin's ledger stays bounded on disk; not before: the 64
// KiB the file is preallocated past its records on Linux are within the
// bound, and a bound under 64 KiB counts as 64 KiB (else every plugin
// would be replaced at its first check).
func TestLedgerRecycledBySize(t *testing.T) {
	for _, bound := range []int64{2 << 10, 96 << 10} {
		t.Run(fmt.Sprintf("%dKiB", bound>>10), func(t *testing.T) {
			pacing := redial.WithPacing(redial.Pacing{Recycle: redial.Recycle{Ledger: bound, Check: 10 * time.Millisecond}})
			h := newHost(t, nil, []redial.Option{pacing}, interceptor.WithLedger())
			ctx := respawntest.Context(t, 20*time.Second)
			i := 0
			for ; h.events.CountFor(respawntest.Rotated) == 0; i++ {
				if i == 2000 {
					t.Fatalf("no rotation after 2000 Appends of a plugin whose ledger may hold %d KiB", bound>>10)
				}
				if i <= 100 && h.events.CountFor(respawntest.PlannedStart) != 0 {
					break
				}
				id := fmt.Sprintf("a%d", i)
				if _, err := h.client.Append(ctx, &testpb.AppendRequest{Id: id}); err != nil {
					t.Fatalf("Append %s: %v", id, err)
				}
				if n := h.executions(t, id); n != 1 {
					t.Fatalf("Append %s ran %d times, want 1", id, n)
				}
			}
			if i <= 100 {
				t.Fatalf("a rotation within %d Appends (their records take under 32 KiB) of a plugin whose ledger may hold %d KiB", i, bound>>10)
			}
			start := h.events.WaitFor(t, "the rotation's start", respawntest.PlannedStart, 1)
			var rerr *redial.RecycleError
			if !errors.As(start.Err, &rerr) || rerr.Rule != "ledger" {
				t.Fatalf("the rotation's cause is %v, want the ledger rule", start.Err)
			}
			// Whenever the check ran, the file it measured outgrew the bound
			// and its preallocated first chunk.
			if limit := max(bound, ledgerwire.Chunk); rerr.Ledger <= limit {
				t.Errorf("rotated for a ledger of %d bytes, within %d (a bound of %d bytes)", rerr.Ledger, limit, bound)
			}
		})
	}
}
