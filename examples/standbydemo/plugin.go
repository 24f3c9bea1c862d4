//go:build linux

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
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// pluginEnv, set to 1 in a process's environment, makes this binary the
// plugin rather than the host: the host execs itself as its plugin.
const pluginEnv = "RESPAWN_STANDBYDEMO_PLUGIN"

// leakEnv, in the plugin's environment, makes it keep that many more bytes
// of resident memory per call: a leak, which recycling deals with.
const leakEnv = "RESPAWN_STANDBYDEMO_LEAK"

// pidMethod is the plugin's one RPC: Empty → Int64Value, the plugin's pid.
// Its ServiceDesc is written by hand, so the demo needs no generated code.
const pidMethod = "/standbydemo.Plugin/PID"

// leaker keeps what the plugin leaks, so that the collector cannot free it.
type leaker struct {
	perCall int
	mu      sync.Mutex
	kept    [][]byte
}

func (l *leaker) handle(_ any, _ context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
	if err := dec(new(emptypb.Empty)); err != nil {
		return nil, err
	}
	if l.perCall > 0 {
		b := make([]byte, l.perCall)
		for i := 0; i < len(b); i += 4096 {
			b[i] = 1 // touch every page, so that it is resident
		}
		l.mu.Lock()
		l.kept = append(l.kept, b)
		l.mu.Unlock()
	}
	return wrapperspb.Int64(int64(os.Getpid())), nil
}

// servePlugin is the plugin's main: it serves on a unix socket in the
// private directory command.Hook gives it (PLUGIN_UNIX_SOCKET_DIR), prints
// the address on stdout for command.Hook, and on SIGTERM finishes the
// calls in flight and exits 0.
func servePlugin() error {
	l := &leaker{}
	if v := os.Getenv(leakEnv); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return fmt.Errorf("%s=%q: want a number of bytes", leakEnv, v)
		}
		l.perCall = n
	}
	path := filepath.Join(os.Getenv("PLUGIN_UNIX_SOCKET_DIR"), "plugin.sock")
	lis, err := net.Listen("unix", path)
	if err != nil {
		return err
	}
	s := grpc.NewServer()
	s.RegisterService(&grpc.ServiceDesc{
		ServiceName: "standbydemo.Plugin",
		HandlerType: (*any)(nil),
		Methods:     []grpc.MethodDesc{{MethodName: "PID", Handler: l.handle}},
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

// callPID calls the plugin and returns the pid that answered.
func callPID(ctx context.Context, cc grpc.ClientConnInterface) (int64, error) {
	out := new(wrapperspb.Int64Value)
	if err := cc.Invoke(ctx, pidMethod, new(emptypb.Empty), out); err != nil {
		return 0, err
	}
	return out.GetValue(), nil
}
