//go:build unix

package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// pluginEnv, set to 1 in a process's environment, makes this binary the
// plugin rather than the host: the host execs itself as its plugin, so the
// demo needs no second binary.
const pluginEnv = "RESPAWN_KILLDEMO_PLUGIN"

// The plugin's two RPCs. Both take a call id and answer with the plugin's
// pid after callTime, so that a kill can land in the middle of a call.
// Read only reads: the host declares it idempotent, so respawn retries it
// on a fresh plugin. Write changes something, so a Write cut short by a
// death may or may not have happened: respawn does not run it twice.
const (
	readMethod  = "/killdemo.Store/Read"
	writeMethod = "/killdemo.Store/Write"
)

// callTime is how long the plugin takes to answer a call.
const callTime = 300 * time.Millisecond

// arrivedFormat is the line the plugin writes to its stderr when a call
// reaches it, so that the host knows when to kill it mid-call.
const arrivedFormat = "arrived %s\n"

// storeService describes the plugin's service by hand, as protoc-gen-go-grpc
// would. Requests and responses are protobuf well-known types, so the demo
// needs no generated code.
var storeService = grpc.ServiceDesc{
	ServiceName: "killdemo.Store",
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{
		{MethodName: "Read", Handler: handle},
		{MethodName: "Write", Handler: handle},
	},
}

// handle serves Read and Write alike: it announces the call, takes
// callTime and answers with the plugin's pid.
func handle(_ any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
	in := new(wrapperspb.StringValue)
	if err := dec(in); err != nil {
		return nil, err
	}
	fmt.Fprintf(os.Stderr, arrivedFormat, in.GetValue())
	select {
	case <-time.After(callTime):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return wrapperspb.Int64(int64(os.Getpid())), nil
}

// servePlugin is the plugin's main: it serves on a unix socket in the
// private directory command.Hook gives it (PLUGIN_UNIX_SOCKET_DIR) and
// prints the address on stdout, which is what command.Hook reads. On
// SIGTERM, redial's way of asking it to stop, it finishes the calls in
// flight and exits 0.
func servePlugin() error {
	path := filepath.Join(os.Getenv("PLUGIN_UNIX_SOCKET_DIR"), "plugin.sock")
	lis, err := net.Listen("unix", path)
	if err != nil {
		return err
	}
	s := grpc.NewServer()
	s.RegisterService(&storeService, struct{}{})
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	go func() {
		<-term
		s.GracefulStop()
	}()
	fmt.Println("unix://" + path)
	return s.Serve(lis)
}
