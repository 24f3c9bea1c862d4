package interceptor_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grpc-respawn/respawn/interceptor"
	"github.com/grpc-respawn/respawn/internal/respawntest"
	"github.com/grpc-respawn/respawn/internal/testpb"
)

// answeredBy says which plugin's pid a call's response must carry.
type answeredBy int

const (
	nobody    answeredBy = iota // the call fails
	dead                        // replayed from the dead plugin's record
	successor                   // run, or resolved, by its successor
)

// TestLedgerKillAt SIGKILLs the plugin at each point of a recorded Append
// (once: its successors live) and checks the caller's answer against the
// plugin's journal: the call runs once, is answered from the dead plugin's
// record, or fails as interrupted in its handler; it never runs twice.
func TestLedgerKillAt(t *testing.T) {
	tests := []struct {
		name       string
		point      string
		resolve    bool // -ledger-resolve: Append has a resolver
		by         answeredBy
		executions int
	}{
		{name: "before-started", point: "before-started", by: successor, executions: 1},
		{name: "after-started", point: "after-started", by: nobody, executions: 0},
		{name: "handler", point: "handler", by: nobody, executions: 1},
		{name: "after-handler", point: "after-handler", by: nobody, executions: 1},
		{name: "after-completed", point: "after-completed", by: dead, executions: 1},
		{name: "before-started/resolver", point: "before-started", resolve: true, by: successor, executions: 1},
		// Not journaled: the resolver runs it now.
		{name: "after-started/resolver", point: "after-started", resolve: true, by: successor, executions: 1},
		// Journaled: the resolver knows it ran, and does not run it again.
		{name: "handler/resolver", point: "handler", resolve: true, by: successor, executions: 1},
		{name: "after-handler/resolver", point: "after-handler", resolve: true, by: successor, executions: 1},
		{name: "after-completed/resolver", point: "after-completed", resolve: true, by: dead, executions: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := []string{"-ledger-kill-at", tt.point, "-ledger-kill-once", filepath.Join(t.TempDir(), "killed")}
			if tt.resolve {
				args = append(args, "-ledger-resolve")
			}
			h := newHost(t, args, nil, interceptor.WithLedger())
			first := h.rc.Current()
			ctx := respawntest.Context(t, 20*time.Second)
			resp, err := h.client.Append(ctx, &testpb.AppendRequest{Id: "a1"})

			if g := h.rc.Current(); g.Number() == first.Number() {
				t.Fatalf("plugin %d still current after the call: it was not killed at %s", g.Number(), tt.point)
			}
			switch tt.by {
			case nobody:
				wantInterrupted(t, err)
				if resp != nil {
					t.Errorf("response %v with the error; want none", resp)
				}
			case dead, successor:
				if err != nil {
					t.Fatalf("Append: %v; want it answered", err)
				}
				want := int64(first.Process().PID)
				if tt.by == successor {
					want = int64(h.rc.Current().Process().PID)
				}
				if resp.GetPid() != want || resp.GetId() != "a1" {
					t.Errorf("response from pid %d for %q; want pid %d (dead plugin %d) for a1", resp.GetPid(), resp.GetId(), want, first.Process().PID)
				}
			}
			if got := h.executions(t, "a1"); got != tt.executions {
				t.Errorf("journal: a1 ran %d times; want %d", got, tt.executions)
			}
		})
	}
}

// wantInterrupted fails t unless err is an outcome unknown because the
// dead plugin's ledger shows the call in its handler.
func wantInterrupted(t *testing.T, err error) {
	t.Helper()
	if !errors.Is(err, interceptor.ErrOutcomeUnknown) || !strings.Contains(err.Error(), "interrupted in its handler") {
		t.Fatalf("err = %v; want ErrOutcomeUnknown, interrupted in its handler", err)
	}
	if got := status.Code(err); got != codes.Unknown {
		t.Errorf("code %v; want %v", got, codes.Unknown)
	}
}

// wantNotIdempotent fails t unless err is today's outcome unknown of a
// call that is not idempotent, with no ledger involved.
func wantNotIdempotent(t *testing.T, err error) {
	t.Helper()
	if !errors.Is(err, interceptor.ErrOutcomeUnknown) || !strings.Contains(err.Error(), "(not idempotent)") {
		t.Fatalf("err = %v; want ErrOutcomeUnknown, not idempotent", err)
	}
}
