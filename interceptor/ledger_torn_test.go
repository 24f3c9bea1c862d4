package interceptor_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/grpc-respawn/respawn/interceptor"
	"github.com/grpc-respawn/respawn/internal/ledgerwire"
	"github.com/grpc-respawn/respawn/internal/respawntest"
	"github.com/grpc-respawn/respawn/internal/testpb"
	"github.com/grpc-respawn/respawn/redial"
)

// tornBytes is how much of its last record a torn ledger file loses.
const tornBytes = 3

// TestLedgerTornRecord kills the plugin after one of its records and tears
// that record, as a write cut short would, before the successor can read
// it: a torn record is no record. Torn "started": the call never started,
// and runs once now. Torn "completed": it was in its handler.
func TestLedgerTornRecord(t *testing.T) {
	tests := []struct {
		name        string
		point       string
		corrupt     bool // spoil the record's checksum instead of tearing it
		interrupted bool
	}{
		{name: "started", point: "after-started"},
		{name: "completed", point: "after-completed", interrupted: true},
		{name: "started/corrupt", point: "after-started", corrupt: true},
		{name: "completed/corrupt", point: "after-completed", corrupt: true, interrupted: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHost(t, []string{"-ledger-kill-at", tt.point, "-ledger-kill-once", filepath.Join(t.TempDir(), "killed")}, nil, interceptor.WithLedger())
			tear := &tearer{corrupt: tt.corrupt}
			f := tear.launching
			h.launching.Store(&f)
			ctx := respawntest.Context(t, 20*time.Second)
			resp, err := h.client.Append(ctx, &testpb.AppendRequest{Id: "a1"})

			torn, terr := tear.result()
			if terr != nil {
				t.Fatal(terr)
			}
			if torn == "" {
				t.Fatal("no dead plugin's ledger was torn before the successor's launch")
			}
			if tt.interrupted {
				wantInterrupted(t, err)
			} else {
				if err != nil {
					t.Fatalf("Append: %v; want it run on the successor", err)
				}
				if got, want := resp.GetPid(), int64(h.rc.Current().Process().PID); got != want {
					t.Errorf("answered by pid %d; want the successor, %d", got, want)
				}
			}
			if got := h.executions(t, "a1"); got != 1 {
				t.Errorf("journal: a1 ran %d times; want 1", got)
			}
		})
	}
}

// tearer tears the last record of the previous launch's ledger file when
// the next launch starts, or with corrupt spoils its checksum, leaving
// the record itself whole. It is safe for concurrent use.
type tearer struct {
	corrupt bool

	mu   sync.Mutex
	torn string // the file torn
	err  error
}

func (tr *tearer) launching(req redial.Request) {
	path := ""
	for _, kv := range req.Env {
		if v, ok := strings.CutPrefix(kv, ledgerwire.Env+"="); ok {
			path = v
		}
	}
	n, err := strconv.ParseUint(strings.TrimSuffix(filepath.Base(path), ".ledger"), 10, 64)
	if err != nil || n < 2 {
		return // no ledger, or the first launch
	}
	prev := filepath.Join(filepath.Dir(path), ledgerwire.FileName(n-1))
	tr.mu.Lock()
	defer tr.mu.Unlock()
	b, err := os.ReadFile(prev)
	last, end := lastFrame(b)
	switch {
	case err != nil:
		tr.err = fmt.Errorf("the dead plugin's ledger: %w", err)
	case last < 0:
		tr.err = fmt.Errorf("the dead plugin's ledger %s has no frame to tear", prev)
	case tr.corrupt:
		b[last+4] ^= 1 // a bit of its checksum
		tr.err = os.WriteFile(prev, b, 0o600)
		tr.torn = prev
	default:
		tr.err = os.Truncate(prev, int64(end-tornBytes))
		tr.torn = prev
	}
}

func (tr *tearer) result() (string, error) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.torn, tr.err
}

// lastFrame returns where the last frame of the ledger file b starts, -1
// if none, and where the frames end: where ledgerwire.FrameLen finds no
// whole frame, at a zero length (the rest of a file preallocated past its
// records) or at the end of b.
func lastFrame(b []byte) (last, end int) {
	last = -1
	for {
		n, ok := ledgerwire.FrameLen(b[end:], int64(len(b)-end))
		if !ok {
			return last, end
		}
		last, end = end, end+ledgerwire.FrameHeader+n
	}
}
