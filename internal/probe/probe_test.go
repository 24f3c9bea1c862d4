package probe_test

import (
	"context"
	"net"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/grpc-respawn/respawn/internal/ownrpc"
	"github.com/grpc-respawn/respawn/internal/probe"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// hangingHealth answers no check until the test ends.
type hangingHealth struct {
	healthpb.UnimplementedHealthServer
	release chan struct{}
}

func (h *hangingHealth) Check(ctx context.Context, _ *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	select {
	case <-h.release:
		return nil, status.Error(codes.Aborted, "released")
	case <-ctx.Done():
		// The deadline reached the server a moment before the client's
		// own timer fired: answer as grpc-go would.
		return nil, status.FromContextError(ctx.Err()).Err()
	}
}

// serve starts a real gRPC server on a loopback port with register's
// services and returns a client connection to it whose interceptor reports
// whether each call's ctx was marked as one of respawn's own.
func serve(t *testing.T, register func(*grpc.Server)) (*grpc.ClientConn, *bool) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	register(s)
	go func() { _ = s.Serve(lis) }()
	t.Cleanup(s.Stop)
	marked := new(bool)
	cc, err := grpc.NewClient(lis.Addr().String(),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			*marked = ownrpc.In(ctx)
			return invoker(ctx, method, req, reply, cc, opts...)
		}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return cc, marked
}

func TestCheck(t *testing.T) {
	withHealth := func(s *grpc.Server) {
		hs := health.NewServer()
		hs.SetServingStatus("down", healthpb.HealthCheckResponse_NOT_SERVING)
		healthpb.RegisterHealthServer(s, hs)
	}
	release := make(chan struct{})
	defer close(release)
	tests := []struct {
		name     string
		register func(*grpc.Server)
		service  string
		closed   bool // the client connection is closed before the check
		want     probe.Verdict
		code     codes.Code
		status   healthpb.HealthCheckResponse_ServingStatus
		alive    bool
		ready    bool
		expired  bool
	}{
		{name: "serving", register: withHealth, want: probe.Serving, status: healthpb.HealthCheckResponse_SERVING, alive: true, ready: true},
		{name: "not serving", register: withHealth, service: "down", want: probe.NotServing, status: healthpb.HealthCheckResponse_NOT_SERVING, alive: true},
		{name: "unknown service", register: withHealth, service: "no-such-service", want: probe.NotServing, code: codes.NotFound, alive: true},
		{name: "no health service", register: func(*grpc.Server) {}, want: probe.NoHealthService, code: codes.Unimplemented, alive: true, ready: true},
		{name: "no answer in time", register: func(s *grpc.Server) { healthpb.RegisterHealthServer(s, &hangingHealth{release: release}) }, want: probe.Unreachable, code: codes.DeadlineExceeded, expired: true},
		{name: "connection closed", register: withHealth, closed: true, want: probe.Unreachable, code: codes.Canceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cc, marked := serve(t, tt.register)
			if tt.closed {
				_ = cc.Close()
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			r := probe.Check(ctx, cc, tt.service, 200*time.Millisecond)
			if r.Verdict != tt.want || status.Code(r.Err) != tt.code || r.Status != tt.status || r.Expired != tt.expired {
				t.Errorf("Check = %v (code %v, status %v, expired %v, err %v); want %v (code %v, status %v, expired %v)",
					r.Verdict, status.Code(r.Err), r.Status, r.Expired, r.Err, tt.want, tt.code, tt.status, tt.expired)
			}
			if got := r.Verdict.Alive(); got != tt.alive {
				t.Errorf("%v.Alive() = %v, want %v", r.Verdict, got, tt.alive)
			}
			if got := r.Verdict.Ready(); got != tt.ready {
				t.Errorf("%v.Ready() = %v, want %v", r.Verdict, got, tt.ready)
			}
			if !tt.closed && !*marked {
				t.Error("the check's ctx was not marked with ownrpc.With")
			}
		})
	}
}
