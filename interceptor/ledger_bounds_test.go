package interceptor_test

import (
	"context"
	"errors"
	"github.com/grpc-respawn/respawn/internal/ledgerwire"
	"github.com/grpc-respawn/respawn/redial"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grpc-respawn/respawn/interceptor"
	"github.com/grpc-respawn/respawn/internal/respawntest"
	"github.com/grpc-respawn/respawn/internal/testpb"
	"github.com/grpc-respawn/respawn/redial/command"
)

// TestLedgerResponseLost kills the plugin once an Append has completed
// with a response its ledger did not keep: the retry neither runs it again
// nor pretends to have its answer.
func TestLedgerResponseLost(t *testing.T) {
	for _, max := range []string{"1", "-1"} {
		t.Run("max-response="+max, func(t *testing.T) {
			args := []string{"-ledger-kill-at", "after-completed", "-ledger-kill-once", filepath.Join(t.TempDir(), "killed"), "-ledger-max-response", max}
			h := newHost(t, args, nil, interceptor.WithLedger())
			ctx := respawntest.Context(t, 20*time.Second)
			_, err := h.client.Append(ctx, &testpb.AppendRequest{Id: "a1"})
			if !errors.Is(err, interceptor.ErrResponseLost) {
				t.Fatalf("err = %v; want ErrResponseLost", err)
			}
			if errors.Is(err, interceptor.ErrOutcomeUnknown) {
				t.Errorf("err = %v matches ErrOutcomeUnknown; the outcome is known", err)
			}
			if got := status.Code(err); got != codes.DataLoss {
				t.Errorf("code %v; want %v", got, codes.DataLoss)
			}
			if got := h.executions(t, "a1"); got != 1 {
				t.Errorf("journal: a1 ran %d times; want 1", got)
			}
		})
	}
}

// TestLedgerWithoutLedger kills a plugin in an Append where the plugin, or
// its successor, keeps no ledger: WithLedger changes nothing, the call's
// outcome is unknown as it is without it, and it ran once.
func TestLedgerWithoutLedger(t *testing.T) {
	tests := []struct {
		name          string
		args          []string // the first plugin's
		successorArgs []string // added for its successors
		ledger        bool     // WithLedger
	}{
		{name: "no WithLedger", args: []string{"-no-ledger"}},
		{name: "plugin without ledger", args: []string{"-no-ledger"}, ledger: true},
		{name: "successor without ledger", successorArgs: []string{"-no-ledger"}, ledger: true},
		{name: "ledger without WithLedger"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var iopts []interceptor.Option
			if tt.ledger {
				iopts = append(iopts, interceptor.WithLedger())
			}
			h := newHost(t, tt.args, nil, iopts...)
			if tt.successorArgs != nil {
				h.swapHook(&command.Hook{Path: h.cmd.Path, Args: append(slices.Clone(h.cmd.Args), tt.successorArgs...)})
			}
			err := h.killMidCall(t, "a1", func(ctx context.Context) error {
				_, err := h.client.Append(ctx, &testpb.AppendRequest{Id: "a1", DelayMs: 10_000})
				return err
			})
			wantNotIdempotent(t, err)
			if got := h.executions(t, "a1"); got != 1 {
				t.Errorf("journal: a1 ran %d times; want 1", got)
			}
			ctx := respawntest.Context(t, 20*time.Second)
			if _, err := h.client.Append(ctx, &testpb.AppendRequest{Id: "a2"}); err != nil {
				t.Fatalf("Append on the successor: %v", err)
			}
			if got := h.executions(t, "a2"); got != 1 {
				t.Errorf("journal: a2 ran %d times; want 1", got)
			}
		})
	}
}

// TestLedgerRetryDeadline: a call retried through the ledger (its attempt
// on the successor names the dead plugin's ledger) whose caller's deadline
// ends while the successor runs it ran, or may have: its outcome is
// unknown, not the bare DeadlineExceeded a retry layer would retry. (When
// the kill lands before the attempt reached the plugin, the retry is a
// plain one, and its deadline is the caller's own error.)
func TestLedgerRetryDeadline(t *testing.T) {
	var viaLedger atomic.Bool
	watch := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if hasOutgoing(ctx, ledgerwire.RetryKey) {
			viaLedger.Store(true)
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	p := interceptor.New(interceptor.WithLedger())
	policy := respawntest.StartFunc(func(h redial.Handle) redial.Binding {
		b := p.Start(h)
		b.DialOptions = append(b.DialOptions, grpc.WithChainUnaryInterceptor(watch))
		return b
	})
	once := filepath.Join(t.TempDir(), "killed")
	h := newHost(t, []string{"-ledger-kill-at", "before-started", "-ledger-kill-once", once}, []redial.Option{withPolicy(policy)})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err := h.client.Append(ctx, &testpb.AppendRequest{Id: "a1", DelayMs: 10_000})
	if viaLedger.Load() {
		wantNotIdempotent(t, err)
	} else if status.Code(err) != codes.DeadlineExceeded {
		t.Errorf("err = %v; want DeadlineExceeded for a plain retry", err)
	}
	if got := h.executions(t, "a1"); got != 1 {
		t.Errorf("journal: a1 ran %d times; want 1, on the successor", got)
	}
}

// hasOutgoing reports whether ctx's outgoing metadata carries key.
func hasOutgoing(ctx context.Context, key string) bool {
	md, _ := metadata.FromOutgoingContext(ctx)
	return len(md[key]) > 0
}
