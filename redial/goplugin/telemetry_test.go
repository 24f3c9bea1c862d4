package goplugin_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/logging"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/selector"
	"google.golang.org/grpc"

	"github.com/grpc-respawn/respawn/interceptor"
	"github.com/grpc-respawn/respawn/internal/respawntest"
	"github.com/grpc-respawn/respawn/internal/testpb"
	"github.com/grpc-respawn/respawn/redial"
)

// methods is a set of full method names seen, safe for concurrent use.
type methods struct {
	mu   sync.Mutex
	seen map[string]int
}

func (m *methods) add(method string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.seen == nil {
		m.seen = make(map[string]int)
	}
	m.seen[method]++
}

// goPlugin returns the go-plugin services' methods seen.
func (m *methods) goPlugin() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for k := range m.seen {
		if strings.HasPrefix(k, "/plugin.") {
			out = append(out, k)
		}
	}
	return out
}

func (m *methods) count(method string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.seen[method]
}

// TestHostRPCsLeaveOutGoPlugin: go-plugin's own RPCs (its broker and stdio
// streams, the Shutdown of a killed client) pass through the interceptors
// a host gives redial.WithDialOptions; go-grpc-middleware's logging behind
// selector with interceptor.HostRPCs logs the host's calls and none of
// them.
func TestHostRPCsLeaveOutGoPlugin(t *testing.T) {
	all, logged := &methods{}, &methods{}
	logger := logging.LoggerFunc(func(_ context.Context, _ logging.Level, msg string, fields ...any) {
		if msg != "finished call" {
			return
		}
		var service, method string
		for i := 0; i+1 < len(fields); i += 2 {
			v, _ := fields[i+1].(string)
			switch fields[i] {
			case logging.ServiceFieldKey:
				service = v
			case logging.MethodFieldKey:
				method = v
			}
		}
		logged.add("/" + service + "/" + method)
	})
	h := newHost(t, setup{ropts: []redial.Option{redial.WithDialOptions(
		grpc.WithChainUnaryInterceptor(
			func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
				all.add(method)
				return invoker(ctx, method, req, reply, cc, opts...)
			},
			selector.UnaryClientInterceptor(logging.UnaryClientInterceptor(logger), interceptor.HostRPCs),
		),
		grpc.WithChainStreamInterceptor(
			func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
				all.add(method)
				return streamer(ctx, desc, cc, method, opts...)
			},
			selector.StreamClientInterceptor(logging.StreamClientInterceptor(logger), interceptor.HostRPCs),
		),
	)}})
	ctx := respawntest.Context(t, 30*time.Second)
	if _, err := h.client.Get(ctx, &testpb.GetRequest{Id: "before"}); err != nil {
		t.Fatal(err)
	}
	first := h.rc.Current()
	respawntest.Kill(t, first)
	if _, err := h.client.Get(ctx, &testpb.GetRequest{Id: "after"}); err != nil {
		t.Fatalf("Get after the kill: %v", err)
	}
	// Closing stops the plugin's client: its Shutdown goes by.
	_ = h.rc.Close()
	if ours := all.goPlugin(); len(ours) == 0 {
		t.Fatal("no go-plugin RPC went through the host's interceptors")
	} else {
		t.Logf("go-plugin's RPCs through the chain: %v", ours)
	}
	if ours := logged.goPlugin(); len(ours) != 0 {
		t.Errorf("the host's log has go-plugin's RPCs: %v", ours)
	}
	if n := logged.count(testpb.Test_Get_FullMethodName); n != 2 {
		t.Errorf("the host's log has %d Gets, want 2", n)
	}
}
