package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// pluginEnv, set to 1 in a process's environment, makes this binary the
// plugin rather than the host: the host execs itself as its plugin, so the
// example needs no second binary.
const pluginEnv = "RESPAWN_PROMETHEUS_EXAMPLE_PLUGIN"

// whoMethod is the plugin's one RPC: it answers with its pid, unless the
// request is "crash <pid>" with its own pid: then it dies in the middle of the
// call, killed by a signal, as a plugin that crashes or is OOM-killed does.
// Its request and response are protobuf well-known types, so the example
// needs no generated code.
const whoMethod = "/example.Plugin/Who"

// pluginService describes the plugin's service by hand, as protoc-gen-go-grpc
// would.
var pluginService = grpc.ServiceDesc{
	ServiceName: "example.Plugin",
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "Who",
		Handler: func(_ any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			in := new(wrapperspb.StringValue)
			if err := dec(in); err != nil {
				return nil, err
			}
			pid := strconv.Itoa(os.Getpid())
			if in.GetValue() == "crash "+pid {
				self, err := os.FindProcess(os.Getpid())
				if err == nil {
					err = self.Kill()
				}
				return nil, fmt.Errorf("could not crash: %v", err)
			}
			return wrapperspb.String(pid), nil
		},
	}},
}

// servePlugin is the plugin's main: it serves on a loopback port and prints
// the address on stdout, which is what command.Hook reads.
func servePlugin() error {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	s := grpc.NewServer()
	s.RegisterService(&pluginService, struct{}{})
	fmt.Println(lis.Addr().String())
	return s.Serve(lis)
}

// who calls the plugin's Who RPC on cc with req and returns the pid that
// answered.
func who(ctx context.Context, cc grpc.ClientConnInterface, req string) (string, error) {
	out := new(wrapperspb.StringValue)
	if err := cc.Invoke(ctx, whoMethod, wrapperspb.String(req), out); err != nil {
		return "", err
	}
	return out.GetValue(), nil
}
