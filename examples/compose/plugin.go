//go:build unix

package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// pluginEnv, set to 1 in a process's environment, makes this binary the
// plugin rather than the host: the host execs itself as its plugin.
const pluginEnv = "RESPAWN_COMPOSE_EXAMPLE_PLUGIN"

// The plugin's two RPCs, StringValue → StringValue. Read only reads (the
// host declares it idempotent); Write changes something. Both answer with
// the plugin's pid and how many times this plugin saw the request, except:
//   - "crash <pid>" with the plugin's own pid kills the plugin in the middle
//     of the call (SIGKILL, as the OOM killer would);
//   - "busy" is answered Unavailable the first time a plugin sees it: a live
//     plugin's own, retriable error.
const (
	readMethod  = "/compose.Store/Read"
	writeMethod = "/compose.Store/Write"
)

// store is the plugin's state: how many times it saw each request.
type store struct {
	mu   sync.Mutex
	seen map[string]int
}

func (s *store) handle(_ any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
	in := new(wrapperspb.StringValue)
	if err := dec(in); err != nil {
		return nil, err
	}
	pid := os.Getpid()
	if in.GetValue() == "crash "+strconv.Itoa(pid) {
		if self, err := os.FindProcess(pid); err == nil {
			_ = self.Kill()
		}
		<-ctx.Done() // the kill is on its way
		return nil, ctx.Err()
	}
	s.mu.Lock()
	s.seen[in.GetValue()]++
	n := s.seen[in.GetValue()]
	s.mu.Unlock()
	if in.GetValue() == "busy" && n == 1 {
		return nil, status.Error(codes.Unavailable, "plugin: busy, try again")
	}
	return wrapperspb.String(fmt.Sprintf("pid %d, request seen %d time(s)", pid, n)), nil
}

// servePlugin is the plugin's main: it serves on a unix socket in the
// private directory command.Hook gives it (PLUGIN_UNIX_SOCKET_DIR), prints
// the address on stdout for command.Hook, and on SIGTERM finishes the
// calls in flight and exits 0.
func servePlugin() error {
	path := filepath.Join(os.Getenv("PLUGIN_UNIX_SOCKET_DIR"), "plugin.sock")
	lis, err := net.Listen("unix", path)
	if err != nil {
		return err
	}
	st := &store{seen: make(map[string]int)}
	s := grpc.NewServer()
	s.RegisterService(&grpc.ServiceDesc{ // by hand, as protoc-gen-go-grpc would
		ServiceName: "compose.Store",
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{
			{MethodName: "Read", Handler: st.handle},
			{MethodName: "Write", Handler: st.handle},
		},
	}, struct{}{})
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	go func() {
		<-term
		s.GracefulStop()
	}()
	fmt.Println("unix://" + path)
	return s.Serve(lis)
}
