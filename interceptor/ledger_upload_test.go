package interceptor_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/grpc-respawn/respawn/interceptor"
	"github.com/grpc-respawn/respawn/internal/respawntest"
	"github.com/grpc-respawn/respawn/internal/testpb"
)

// uploadChunk is the size of an upload's chunks, as Velero sends them.
const uploadChunk = 16 << 10

// upload sends chunks chunks of uploadChunk bytes, each refilled in one
// reused buffer, as Velero's PutObject does, the first naming key; it
// returns the response and the SHA-256 of the bytes meant to be stored. A
// SendMsg that finds the stream ended (io.EOF) stops sending, and the
// answer is read, as grpc-go's callers do.
func upload(ctx context.Context, c testpb.TestClient, id, key string, chunks int) (*testpb.UploadResponse, string, error) {
	sum := sha256.New()
	buf := make([]byte, uploadChunk)
	fill := func(i int) {
		for j := range buf {
			buf[j] = byte(i*131 + j*7)
		}
	}
	for i := range chunks {
		fill(i)
		sum.Write(buf)
	}
	want := hex.EncodeToString(sum.Sum(nil))
	st, err := c.Upload(ctx)
	if err != nil {
		return nil, want, err
	}
	for i := range chunks {
		fill(i)
		req := &testpb.UploadRequest{Id: id, Data: buf}
		if i == 0 {
			req.Key = key
		}
		if err := st.Send(req); err == io.EOF {
			break
		} else if err != nil {
			return nil, want, err
		}
	}
	resp, err := st.CloseAndRecv()
	return resp, want, err
}

// TestLedgerUploadKillAt SIGKILLs the plugin at each point of a recorded
// Upload (once: its successors live) and checks the caller's answer, the
// bytes stored, and how many times the object was stored: once, answered
// from the dead plugin's record, by its successor, or failed with the
// reason; never twice, and never other bytes than were sent.
func TestLedgerUploadKillAt(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		chunks  int
		small   bool // a replay buffer smaller than one chunk: dropped at the first Send, before any kill
		resolve bool
		by      answeredBy
		reason  string // of the outcome unknown, when by is nobody
		stores  int
	}{
		{name: "before-started", args: []string{"-ledger-kill-at", "before-started"}, chunks: 4, by: successor, stores: 1},
		{name: "mid-receive", args: []string{"-upload-kill-after", "2"}, chunks: 4, by: nobody, reason: "interrupted in its handler", stores: 0},
		{name: "mid-receive/resolver", args: []string{"-upload-kill-after", "2"}, chunks: 4, resolve: true, by: successor, stores: 1},
		{name: "after-handler", args: []string{"-ledger-kill-at", "after-handler"}, chunks: 4, by: nobody, reason: "interrupted in its handler", stores: 1},
		{name: "after-handler/resolver", args: []string{"-ledger-kill-at", "after-handler"}, chunks: 4, resolve: true, by: successor, stores: 1},
		{name: "after-completed", args: []string{"-ledger-kill-at", "after-completed"}, chunks: 4, by: dead, stores: 1},
		{name: "after-completed/larger than the replay buffer", args: []string{"-ledger-kill-at", "after-completed"}, chunks: 8, small: true, by: dead, stores: 1},
		{name: "after-handler/larger than the replay buffer/resolver", args: []string{"-ledger-kill-at", "after-handler"}, chunks: 8, small: true, resolve: true, by: successor, stores: 1},
		{name: "mid-receive/larger than the replay buffer/resolver", args: []string{"-upload-kill-after", "6"}, chunks: 8, small: true, resolve: true, by: nobody, reason: "did not take effect, and could not be replayed", stores: 0},
		{name: "before-started/larger than the replay buffer", args: []string{"-ledger-kill-at", "before-started"}, chunks: 8, small: true, by: nobody, reason: "never started, and could not be replayed", stores: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append(tt.args, "-ledger-kill-once", filepath.Join(t.TempDir(), "killed"))
			if tt.resolve {
				args = append(args, "-ledger-resolve")
			}
			opts := []interceptor.Option{interceptor.WithLedger()}
			if tt.small {
				opts = append(opts, interceptor.WithLimits(interceptor.Limits{ReplayBuffer: uploadChunk / 2}))
			}
			h := newHost(t, args, nil, opts...)
			first := h.rc.Current()
			ctx := respawntest.Context(t, 20*time.Second)
			resp, want, err := upload(ctx, h.client, "u1", "backups/b1", tt.chunks)

			if g := h.rc.Current(); g.Number() == first.Number() {
				t.Fatalf("plugin %d still current after the upload: it was not killed", g.Number())
			}
			switch tt.by {
			case nobody:
				if !errors.Is(err, interceptor.ErrOutcomeUnknown) || !strings.Contains(err.Error(), tt.reason) {
					t.Fatalf("err = %v; want ErrOutcomeUnknown, %s", err, tt.reason)
				}
			case dead, successor:
				if err != nil {
					t.Fatalf("Upload: %v; want it answered", err)
				}
				pid := int64(first.Process().PID)
				if tt.by == successor {
					pid = int64(h.rc.Current().Process().PID)
				}
				if resp.GetPid() != pid || resp.GetId() != "u1" {
					t.Errorf("response from pid %d for %q; want pid %d (dead plugin %d) for u1", resp.GetPid(), resp.GetId(), pid, first.Process().PID)
				}
				if resp.GetSha256() != want || resp.GetSize() != int64(tt.chunks*uploadChunk) {
					t.Errorf("stored %d bytes, sha256 %s; want %d bytes, %s: the bytes sent", resp.GetSize(), resp.GetSha256(), tt.chunks*uploadChunk, want)
				}
			}
			if got := h.executions(t, "u1"); got != tt.stores {
				t.Errorf("journal: u1 stored %d times; want %d", got, tt.stores)
			}
		})
	}
}
