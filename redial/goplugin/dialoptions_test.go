package goplugin_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/grpc-respawn/respawn/internal/respawntest"
	"github.com/grpc-respawn/respawn/internal/testpb"
	"github.com/grpc-respawn/respawn/redial"
)

// methodCounter is a host's own interceptor, given to redial.WithDialOptions.
type methodCounter struct {
	mu    sync.Mutex
	calls map[string]int
}

func (m *methodCounter) unary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	m.mu.Lock()
	m.calls[method]++
	m.mu.Unlock()
	return invoker(ctx, method, req, reply, cc, opts...)
}

func (m *methodCounter) count(method string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.calls[method]
}

// TestWithDialOptionsReachTheHook: an interceptor given to
// redial.WithDialOptions runs for every call through the go-plugin hook,
// also on the plugin that replaced a killed one, once per call (it sits
// outside respawn's retries), and redial's default insecure credentials do
// not reach go-plugin: AutoMTLS still works.
func TestWithDialOptionsReachTheHook(t *testing.T) {
	for _, mtls := range []bool{false, true} {
		name := "plain"
		if mtls {
			name = "AutoMTLS"
		}
		t.Run(name, func(t *testing.T) {
			counter := &methodCounter{calls: make(map[string]int)}
			h := newHost(t, setup{mtls: mtls, ropts: []redial.Option{
				redial.WithDialOptions(grpc.WithChainUnaryInterceptor(counter.unary)),
			}})
			ctx := respawntest.Context(t, 30*time.Second)
			for i := range 2 {
				if _, err := h.client.Get(ctx, &testpb.GetRequest{Id: "before"}); err != nil {
					t.Fatalf("Get %d: %v", i+1, err)
				}
			}
			respawntest.Kill(t, h.rc.Current())
			if _, err := h.client.Get(ctx, &testpb.GetRequest{Id: "after"}); err != nil {
				t.Fatalf("Get after the kill: %v", err)
			}
			if g := h.rc.Current().Number(); g < 2 {
				t.Fatalf("current generation %d after the kill, want 2 or more", g)
			}
			if got := counter.count(testpb.Test_Get_FullMethodName); got != 3 {
				t.Errorf("the host's interceptor ran for %d of 3 calls", got)
			}
			counter.mu.Lock()
			defer counter.mu.Unlock()
			for m, n := range counter.calls {
				if !strings.HasPrefix(m, "/respawn.test.v1.") {
					t.Logf("also ran for %s (%d)", m, n) // go-plugin's own RPCs share the connection
				}
			}
		})
	}
}
