//go:build unix

package interceptor_test

import (
	"context"
	"io"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/logging"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/selector"
	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/stats"

	"github.com/grpc-respawn/respawn"
	"github.com/grpc-respawn/respawn/health"
	"github.com/grpc-respawn/respawn/interceptor"
	"github.com/grpc-respawn/respawn/internal/ownrpc"
	"github.com/grpc-respawn/respawn/internal/plugintest"
	"github.com/grpc-respawn/respawn/internal/respawntest"
	"github.com/grpc-respawn/respawn/internal/testpb"
	"github.com/grpc-respawn/respawn/redial"
	"github.com/grpc-respawn/respawn/redial/command"
)

// sent records every unary call the chain carries, unfiltered: its method
// and the target of the connection it went to.
type sent struct {
	respawntest.Log[string] // "method target"
}

func (s *sent) unary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	s.Add(method + " " + cc.Target())
	return invoker(ctx, method, req, reply, cc, opts...)
}

// count returns how many calls of method went to a target containing in.
func (s *sent) count(method, in string) int {
	n := 0
	for _, c := range s.All() {
		m, target, _ := strings.Cut(c, " ")
		if m == method && strings.Contains(target, in) {
			n++
		}
	}
	return n
}

// wait waits until n calls of method have been recorded, waking on each
// call recorded.
func (s *sent) wait(t *testing.T, method string, n int) {
	t.Helper()
	for i, from := 0, 0; i < n; i++ {
		_, from = s.Wait(t, from, method, func(c string) bool { return strings.HasPrefix(c, method+" ") })
		from++
	}
}

// tagged is a stats handler with a filter, as otelgrpc's: it keeps the
// methods of the RPCs the filter lets through.
type tagged struct {
	filter func(*stats.RPCTagInfo) bool
	mu     sync.Mutex
	rpcs   []string
}

func (h *tagged) TagRPC(ctx context.Context, info *stats.RPCTagInfo) context.Context {
	if h.filter(info) {
		h.mu.Lock()
		h.rpcs = append(h.rpcs, info.FullMethodName)
		h.mu.Unlock()
	}
	return ctx
}
func (*tagged) HandleRPC(context.Context, stats.RPCStats) {}
func (*tagged) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context {
	return ctx
}
func (*tagged) HandleConn(context.Context, stats.ConnStats) {}

func (h *tagged) methods() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.rpcs)
}

// TestHostTelemetryLeavesOutOurRPCs: with interceptor.HostRPCs around
// go-grpc-middleware's logging interceptor, and interceptor.IsHostRPC as a
// stats handler's filter, the host's log and stats see the host's calls —
// a unary call, a stream, and a health check of its own — and none of
// respawn's: not the health watcher's probes of respawn.New, alive or
// failing around a SIGKILL, nor the readiness probe of a launch whose
// connection fails. An unfiltered interceptor in the same chain sees them
// all go by.
func TestHostTelemetryLeavesOutOurRPCs(t *testing.T) {
	bin := plugintest.BuildOnce(t)
	journal := filepath.Join(t.TempDir(), "journal")
	// The second launch prints the address of a socket nobody listens
	// on: its connection fails, and redial probes it before it launches
	// the third.
	nowhere := filepath.Join(t.TempDir(), "nowhere.sock")
	lis, err := net.ListenUnix("unix", &net.UnixAddr{Name: nowhere, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	lis.SetUnlinkOnClose(false)
	lis.Close()
	var launches atomic.Int32
	hook := respawntest.RespawnerFunc(func(ctx context.Context, req redial.Request) (redial.Backend, error) {
		args := []string{"-journal", journal}
		if launches.Add(1) == 2 {
			args = []string{"-print", "unix://" + nowhere}
		}
		return (&command.Hook{Path: bin, Args: args}).Respawn(ctx, req)
	})
	all := &sent{}
	p := newProbes()
	st := &tagged{filter: interceptor.IsHostRPC}
	rc, err := respawn.New(hook,
		respawn.WithConn(redial.WithDialOptions(
			grpc.WithChainUnaryInterceptor(
				all.unary,
				selector.UnaryClientInterceptor(logging.UnaryClientInterceptor(p.logger()), interceptor.HostRPCs),
			),
			grpc.WithChainStreamInterceptor(
				selector.StreamClientInterceptor(logging.StreamClientInterceptor(p.logger()), interceptor.HostRPCs),
			),
			grpc.WithStatsHandler(st),
		)),
		respawn.WithHealth(health.Config{Interval: 20 * time.Millisecond}),
	)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	ctx := respawntest.Context(t, 30*time.Second)
	if err := rc.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	client := testpb.NewTestClient(rc)
	if _, err := client.Get(ctx, &testpb.GetRequest{Id: "before"}); err != nil {
		t.Fatal(err)
	}
	const check = healthpb.Health_Check_FullMethodName
	all.wait(t, check, 3) // the watcher's probes
	respawntest.Kill(t, rc.Current())
	if _, err := client.Get(ctx, &testpb.GetRequest{Id: "after"}); err != nil {
		t.Fatalf("Get after the kill: %v", err)
	}
	if n := launches.Load(); n != 3 {
		t.Fatalf("%d launches, want 3: the plugin, the one that failed, its successor", n)
	}
	stream, err := client.Watch(ctx, &testpb.WatchRequest{Id: "w", Count: 1})
	if err != nil {
		t.Fatal(err)
	}
	for err == nil {
		_, err = stream.Recv()
	}
	if err != io.EOF {
		t.Fatalf("Watch: %v", err)
	}
	if _, err := healthpb.NewHealthClient(rc).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatalf("the host's own health check: %v", err)
	}
	g := rc.Current().Number()
	all.wait(t, check, 10) // more of the watcher's probes
	if rc.Current().Number() != g {
		t.Fatal("the plugin was replaced again")
	}

	if n := all.count(check, "nowhere.sock"); n == 0 {
		t.Errorf("no readiness probe of the failed launch went through the chain")
	}
	get, watch := testpb.Test_Get_FullMethodName, testpb.Test_Watch_FullMethodName
	if n := all.count(get, ""); n < 2 {
		t.Errorf("%d Gets through the chain, want at least 2", n)
	}
	if got := len(p.logged(get)); got != 2 {
		t.Errorf("logged %d Gets, want 2", got)
	}
	if got := len(p.logged(watch)); got != 1 {
		t.Errorf("logged %d Watches, want 1", got)
	}
	// Of all the checks that went by, the host's log has its own only.
	if got := len(p.logged(check)); got != 1 {
		t.Errorf("logged %d health checks of %d sent, want 1: the host's own", got, all.count(check, ""))
	}
	// A stats filter cannot tell the host's own check from respawn's: it
	// leaves out both.
	var gets, watches int
	for _, m := range st.methods() {
		switch m {
		case get:
			gets++
		case watch:
			watches++
		default:
			t.Errorf("the stats handler kept %s", m)
		}
	}
	if gets < 2 || watches != 1 {
		t.Errorf("the stats handler kept %d Gets and %d Watches, want at least 2 and 1", gets, watches)
	}
}

// TestHostRPCsMatch: HostRPCs leaves out a call whose context respawn
// marked, and go-plugin's own services by name; IsHostRPC leaves out those
// services and every health check.
func TestHostRPCsMatch(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		method      string
		host, stats bool // HostRPCs with the host's ctx, IsHostRPC
	}{
		{"/respawn.test.v1.Test/Get", true, true},
		{"/grpc.health.v1.Health/Check", true, false},
		{"/grpc.health.v1.Health/Watch", true, true},
		{"/plugin.GRPCController/Shutdown", false, false},
		{"/plugin.GRPCBroker/StartStream", false, false},
		{"/plugin.GRPCStdio/StreamStdio", false, false},
		{"/plugin.Other/Method", true, true},
	} {
		svc, m, _ := strings.Cut(strings.TrimPrefix(tc.method, "/"), "/")
		meta := interceptors.CallMeta{Service: svc, Method: m, IsClient: true}
		if got := interceptor.HostRPCs.Match(ownrpc.With(ctx), meta); got {
			t.Errorf("HostRPCs.Match(respawn's ctx, %s) = %v", tc.method, got)
		}
		if got := interceptor.HostRPCs.Match(ctx, meta); got != tc.host {
			t.Errorf("HostRPCs.Match(the host's ctx, %s) = %v, want %v", tc.method, got, tc.host)
		}
		if got := interceptor.IsHostRPC(&stats.RPCTagInfo{FullMethodName: tc.method}); got != tc.stats {
			t.Errorf("IsHostRPC(%s) = %v, want %v", tc.method, got, tc.stats)
		}
	}
}
