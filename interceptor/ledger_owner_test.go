package interceptor_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/grpc-respawn/respawn/interceptor"
	"github.com/grpc-respawn/respawn/internal/respawntest"
	"github.com/grpc-respawn/respawn/internal/testpb"
)

// TestLedgerOpenedByAChild: a plugin that starts a child of its own binary
// before it opens its ledger, the child inheriting its environment and
// opening the ledger file first, keeps no ledger, and the host knows it: an
// Append killed in its handler fails as an outcome unknown, and runs once.
func TestLedgerOpenedByAChild(t *testing.T) {
	h := newHost(t, []string{"-ledger-child-first", "-ledger-kill-at", "handler", "-ledger-kill-once", filepath.Join(t.TempDir(), "killed")}, nil, interceptor.WithLedger())
	_, err := h.client.Append(respawntest.Context(t, 20*time.Second), &testpb.AppendRequest{Id: "a1"})
	wantNotIdempotent(t, err)
	if got := h.executions(t, "a1"); got != 1 {
		t.Errorf("journal: a1 ran %d times; want 1", got)
	}
}

// TestLedgerFileTakenBefore: a plugin that makes, before its successor is
// launched, the file its successor's ledger would be, does not make the
// successor seem to keep a ledger: an Append killed in the successor's
// handler fails as an outcome unknown, and runs once.
func TestLedgerFileTakenBefore(t *testing.T) {
	h := newHost(t, []string{"-ledger-precreate-next", "-ledger-kill-at", "handler", "-ledger-kill-once", filepath.Join(t.TempDir(), "killed")}, nil, interceptor.WithLedger())
	respawntest.Kill(t, h.rc.Current())
	h.events.WaitCurrent(t, h.rc, 2)
	_, err := h.client.Append(respawntest.Context(t, 20*time.Second), &testpb.AppendRequest{Id: "a1"})
	wantNotIdempotent(t, err)
	if got := h.executions(t, "a1"); got != 1 {
		t.Errorf("journal: a1 ran %d times; want 1", got)
	}
}
