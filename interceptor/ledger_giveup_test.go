//go:build unix

package interceptor_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/retry"
	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/grpc-respawn/respawn/interceptor"
	"github.com/grpc-respawn/respawn/internal/plugintest"
	"github.com/grpc-respawn/respawn/internal/respawntest"
	"github.com/grpc-respawn/respawn/internal/testpb"
	"github.com/grpc-respawn/respawn/redial"
	"github.com/grpc-respawn/respawn/redial/command"
)

// TestLedgerRetryNeverReached: an Append completes on a plugin that is
// SIGKILLed before it answers; its ledger retry goes to the successor,
// which dies, or is replaced and its connection closed, before the attempt
// reaches it, and the call's attempts are spent. The call ran: the caller
// gets ErrOutcomeUnknown, which Retriable refuses, so that
// go-grpc-middleware's retry outside respawn does not run it again, under
// a new ledger id, on the next plugin.
func TestLedgerRetryNeverReached(t *testing.T) {
	tests := []struct {
		name   string
		retire bool // the successor is replaced, not killed
		pacing redial.Pacing
	}{
		{name: "respawned"},
		{name: "spare", pacing: redial.Pacing{Spares: 1}},
		{name: "connection closing", retire: true, pacing: redial.Pacing{GracePeriod: -1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bin := plugintest.BuildOnce(t)
			journal := filepath.Join(t.TempDir(), "journal")
			cmd := &command.Hook{Path: bin, Args: []string{"-journal", journal,
				"-ledger-kill-at", "after-completed", "-ledger-kill-once", filepath.Join(t.TempDir(), "killed")}}
			var launches atomic.Int32
			var doomed atomic.Pointer[victim]
			var handle redial.Handle
			hook := respawntest.RespawnerFunc(func(ctx context.Context, req redial.Request) (redial.Backend, error) {
				b, err := cmd.Respawn(ctx, req)
				if err != nil {
					return b, err
				}
				opts := append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, req.DialOptions...)
				opts = append(opts, grpc.WithChainUnaryInterceptor(endBeforeSent(&doomed)))
				if b.Conn, err = grpc.NewClient(b.Target, opts...); err != nil {
					_ = b.Stop()
					return redial.Backend{}, err
				}
				if launches.Add(1) == 2 {
					v := &victim{cc: b.Conn, end: func(ctx context.Context) { killBeforeSent(t, ctx, b.Process) }}
					if tt.retire {
						v.end = func(ctx context.Context) { retireBeforeSent(t, ctx, handle, b.Conn) }
					}
					doomed.Store(v)
				}
				return b, nil
			})
			outside := grpc.WithChainUnaryInterceptor(retry.UnaryClientInterceptor(
				retry.WithMax(3), retry.WithRetriable(interceptor.Retriable)))
			rh := respawntest.NewHost(t, hook, interceptor.New(interceptor.WithLedger(), interceptor.WithLimits(interceptor.Limits{MaxAttempts: 2})),
				redial.WithDialOptions(outside), redial.WithPacing(tt.pacing))
			handle = rh.Handle

			ctx := respawntest.Context(t, 20*time.Second)
			_, err := rh.Client.Append(ctx, &testpb.AppendRequest{Id: "a1"})
			if !errors.Is(err, interceptor.ErrOutcomeUnknown) || interceptor.Retriable(err) {
				t.Errorf("Append: %v (code %v, Retriable %v); want ErrOutcomeUnknown, not retriable", err, status.Code(err), interceptor.Retriable(err))
			}
			j, err := plugintest.ReadJournal(journal)
			if err != nil {
				t.Fatal(err)
			}
			if j["a1"] != 1 {
				t.Errorf("journal: a1 ran %d times; want 1", j["a1"])
			}
		})
	}
}

// victim is a plugin's connection whose first Append endBeforeSent ends.
type victim struct {
	cc  *grpc.ClientConn
	end func(ctx context.Context) // given the attempt's ctx
}

// endBeforeSent is an interceptor between respawn's and grpc-go's that,
// when an Append comes for the victim's connection, ends the victim's
// plugin or connection before it sends the Append on: the attempt never
// has a transport.
func endBeforeSent(v *atomic.Pointer[victim]) grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if vi := v.Load(); method == testpb.Test_Append_FullMethodName && vi != nil && vi.cc == cc && v.CompareAndSwap(vi, nil) {
			vi.end(ctx)
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	}
}

// killBeforeSent SIGKILLs proc, and returns once it is reaped and the
// attempt's ctx, which ends with it, has ended.
func killBeforeSent(t *testing.T, ctx context.Context, proc *redial.Process) {
	if err := syscall.Kill(proc.PID, syscall.SIGKILL); err != nil {
		t.Errorf("SIGKILL pid %d: %v", proc.PID, err)
	}
	wait := respawntest.Context(t, 10*time.Second)
	select {
	case <-proc.Done():
	case <-wait.Done():
		t.Errorf("pid %d not reaped after SIGKILL", proc.PID)
	}
	select {
	case <-ctx.Done():
	case <-wait.Done():
		t.Errorf("the attempt on pid %d went on after its exit", proc.PID)
	}
}

// retireBeforeSent replaces the current plugin, whose connection is cc, and
// returns once redial has closed cc.
func retireBeforeSent(t *testing.T, ctx context.Context, h redial.Handle, cc *grpc.ClientConn) {
	if _, err := h.Replace(ctx, h.Current(), errors.New("replaced before the attempt is sent")); err != nil {
		t.Errorf("Replace: %v", err)
	}
	wait := respawntest.Context(t, 10*time.Second)
	for s := cc.GetState(); s != connectivity.Shutdown; s = cc.GetState() {
		if !cc.WaitForStateChange(wait, s) {
			t.Errorf("the replaced plugin's connection was never closed")
			return
		}
	}
}
