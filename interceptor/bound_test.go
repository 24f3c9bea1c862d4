//go:build unix

package interceptor_test

import (
	"errors"
	"testing"
	"time"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/retry"
	"google.golang.org/grpc"

	"github.com/grpc-respawn/respawn/interceptor"
	"github.com/grpc-respawn/respawn/internal/respawntest"
	"github.com/grpc-respawn/respawn/internal/testpb"
	"github.com/grpc-respawn/respawn/redial"
)

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
		withPolicy(respawntest.StartFunc(func(h redial.Handle) redial.Binding {
			b := policy.Start(h)
			b.DialOptions = append([]grpc.DialOption{grpc.WithChainUnaryInterceptor(p.enter)}, b.DialOptions...)
			return b
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
	if !errors.Is(err, redial.ErrPluginGone) {
		t.Fatalf("bound Get on the dead plugin's stub: got %v, want ErrPluginGone", err)
	}
	if n := p.entries(get); n != 1 {
		t.Errorf("the bound Get reached respawn %d times, want 1", n)
	}
	if n := h.executions(t, "bound"); n != 0 {
		t.Errorf("the bound Get ran %d times, want 0", n)
	}
}
