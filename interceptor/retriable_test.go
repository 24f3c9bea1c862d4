package interceptor_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/retry"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grpc-respawn/respawn/interceptor"
	"github.com/grpc-respawn/respawn/internal/respawntest"
	"github.com/grpc-respawn/respawn/internal/testpb"
	"github.com/grpc-respawn/respawn/redial"
)

// TestRetriable: a retry layer outside respawn retries Unavailable and
// ResourceExhausted, never one of respawn's verdicts nor a context error.
func TestRetriable(t *testing.T) {
	eof := status.Error(codes.Unavailable, "error reading from server: EOF")
	for _, tt := range []struct {
		name string
		err  error
		want bool
	}{
		{"a live plugin's Unavailable", status.Error(codes.Unavailable, "bucket is read-only"), true},
		{"ResourceExhausted", status.Error(codes.ResourceExhausted, "quota"), true},
		{"a transport's Unavailable", eof, true},
		{"ErrPluginGone", interceptor.ErrPluginGone, false},
		{"ErrPluginGone, wrapped", fmt.Errorf("stub: %w", interceptor.ErrPluginGone), false},
		{"outcome unknown", &interceptor.OutcomeUnknownError{Method: "/m", Err: eof}, false},
		{"poison request", &interceptor.PoisonRequestError{Method: "/m", Deaths: 2, Err: eof}, false},
		{"stream broken", &interceptor.StreamBrokenError{Method: "/m", Err: eof}, false},
		{"closed Conn", redial.ErrClosed, false},
		{"caller's deadline", context.DeadlineExceeded, false},
		{"NotFound", status.Error(codes.NotFound, "no such key"), false},
		{"nil", nil, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := interceptor.Retriable(tt.err); got != tt.want {
				t.Errorf("Retriable(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
	if got := status.Code(interceptor.ErrPluginGone); got != codes.Unavailable {
		t.Errorf("ErrPluginGone's code = %v, want Unavailable, as its doc says", got)
	}
}

// TestBoundCallNotRetriedOutside: a call of a bound method whose plugin is
// gone fails with ErrPluginGone, which go-grpc-middleware's retry given
// Retriable does not send again: it reaches respawn once.
func TestBoundCallNotRetriedOutside(t *testing.T) {
	p := newProbes()
	get := testpb.Test_Get_FullMethodName
	policy := interceptor.New(interceptor.WithBoundMethods(func(m string) bool { return m == get }))
	h := newHost(t, nil, []redial.Option{
		redial.WithDialOptions(grpc.WithChainUnaryInterceptor(
			retry.UnaryClientInterceptor(retry.WithMax(3), retry.WithRetriable(interceptor.Retriable)),
		)),
		redial.WithPolicy(redial.PolicyFunc(func(h *redial.Handle) []grpc.DialOption {
			return append([]grpc.DialOption{grpc.WithChainUnaryInterceptor(p.enter)}, policy.DialOptions(h)...)
		})),
	})
	g := h.rc.Current()
	stub := testpb.NewTestClient(g.ClientConn()) // dispensed from this plugin
	respawntest.Kill(t, g)
	waitLeftReady(t, g)
	if _, err := h.client.Put(respawntest.Context(t, 20*time.Second), &testpb.PutRequest{}); err != nil {
		t.Fatalf("Put after the kill: %v", err)
	}
	_, err := stub.Get(respawntest.Context(t, 20*time.Second), &testpb.GetRequest{Id: "bound"})
	if !errors.Is(err, interceptor.ErrPluginGone) {
		t.Fatalf("bound Get on the dead plugin's stub: got %v, want ErrPluginGone", err)
	}
	if n := p.entries(get); n != 1 {
		t.Errorf("the bound Get reached respawn %d times, want 1", n)
	}
	if n := h.executions(t, "bound"); n != 0 {
		t.Errorf("the bound Get ran %d times, want 0", n)
	}
}
