package interceptor_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/grpc-respawn/respawn/interceptor"
	"github.com/grpc-respawn/respawn/internal/respawntest"
	"github.com/grpc-respawn/respawn/internal/testpb"
	"github.com/grpc-respawn/respawn/redial"
)

const (
	getMethodName   = "/respawn.test.v1.Test/Get"
	watchMethodName = "/respawn.test.v1.Test/Watch"
)

// excluded is the methods the cases of TestExcludedMethodsStayRouted
// exclude from retries: a unary one and a stream.
func excluded(m string) bool { return m == getMethodName || m == watchMethodName }

// TestExcludedMethodsStayRouted: a method excluded from retries by
// WithPassthrough still reaches the current plugin from a stub bound to the
// first one; only go-plugin's and the health service's own methods stay
// where they were sent. Called while the successor is still starting, such
// a call waits for it rather than go to the dead plugin's connection.
func TestExcludedMethodsStayRouted(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []redial.Option
	}{
		{"WithPassthrough", []redial.Option{withPolicy(interceptor.New(
			interceptor.WithPassthrough(excluded)))}},
	} {
		for _, during := range []bool{false, true} {
			name := tc.name
			if during {
				name += ", during the respawn"
			}
			t.Run(name, func(t *testing.T) {
				excludedRouted(t, tc.opts, during)
			})
		}
	}
}

// excludedRouted kills the plugin and calls Get, then Watch, which opts
// exclude from retries, on a stub bound to the dead plugin's connection:
// after the successor is serving, or at once while it takes 300ms to start.
func excludedRouted(t *testing.T, opts []redial.Option, during bool) {
	var args []string
	if during {
		args = []string{"-start-delay", "300ms"}
	}
	h := newHost(t, args, opts)
	first := h.rc.Current()
	bound := testpb.NewTestClient(first.ClientConn()) // as a go-plugin stub dispensed once
	health := healthpb.NewHealthClient(first.ClientConn())
	respawntest.Kill(t, first)
	ctx := respawntest.Context(t, 20*time.Second)
	if !during {
		if _, err := h.handle.Next(ctx, first); err != nil {
			t.Fatal(err)
		}
	}
	resp, err := bound.Get(ctx, &testpb.GetRequest{})
	if err != nil {
		t.Fatalf("Get, excluded from retries, on the first plugin's stub: %v", err)
	}
	next := h.rc.Current()
	if next == first || resp.GetPid() != int64(next.Process().PID) {
		t.Errorf("answered by pid %d, want the new plugin's %d", resp.GetPid(), next.Process().PID)
	}
	stream, err := bound.Watch(ctx, &testpb.WatchRequest{Count: 1})
	if err != nil {
		t.Fatalf("Watch, excluded from retries, on the first plugin's stub: %v", err)
	}
	m, err := stream.Recv()
	if err != nil {
		t.Fatalf("Watch's message: %v", err)
	}
	if m.GetPid() != int64(next.Process().PID) {
		t.Errorf("stream answered by pid %d, want the new plugin's %d", m.GetPid(), next.Process().PID)
	}
	// The health check is the first plugin's own: it is not sent to its
	// successor.
	if _, err := health.Check(ctx, &healthpb.HealthCheckRequest{}); status.Code(err) != codes.Canceled {
		t.Errorf("health check on the retired connection: %v, want it to fail where it was sent", err)
	}
}

// TestRequestAwareIdempotency: WithIdempotencyFunc sees the request, so a
// host whose stubs cannot pass call options decides per call.
func TestRequestAwareIdempotency(t *testing.T) {
	byID := interceptor.WithIdempotencyFunc(func(method string, req any) (bool, bool) {
		r, ok := req.(*testpb.AppendRequest)
		return ok && strings.HasPrefix(r.GetId(), "idem-"), ok
	})
	h := newHost(t, nil, nil, byID)
	err := h.killMidCall(t, "idem-1", func(ctx context.Context) error {
		_, err := h.client.Append(ctx, &testpb.AppendRequest{Id: "idem-1", DelayMs: 1000})
		return err
	})
	if err != nil {
		t.Errorf("an Append the func calls idempotent: %v, want it retried", err)
	}
	if n := h.executions(t, "idem-1"); n != 2 {
		t.Errorf("idem-1 ran %d times, want 2", n)
	}
	err = h.killMidCall(t, "plain-1", func(ctx context.Context) error {
		_, err := h.client.Append(ctx, &testpb.AppendRequest{Id: "plain-1", DelayMs: 5000})
		return err
	})
	if !errors.Is(err, interceptor.ErrOutcomeUnknown) {
		t.Errorf("an Append the func calls not idempotent: %v, want ErrOutcomeUnknown", err)
	}
}
