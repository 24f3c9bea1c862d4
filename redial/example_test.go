//go:build unix

package redial_test

import (
	"context"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/grpc-respawn/respawn/interceptor"
	"github.com/grpc-respawn/respawn/redial"
	"github.com/grpc-respawn/respawn/redial/command"
)

// pluginEnv, set to 1 in a process's environment, makes the examples'
// binary the plugin: the examples exec themselves as their plugin, so they
// need no second binary. A real host knows its plugin's path.
const pluginEnv = "RESPAWN_REDIAL_EXAMPLE_PLUGIN"

// pidMethod answers with the pid of the plugin that served it.
const pidMethod = "/example.Plugin/PID"

// pluginService describes the plugin's service by hand, as
// protoc-gen-go-grpc would, with protobuf well-known types.
var pluginService = grpc.ServiceDesc{
	ServiceName: "example.Plugin",
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "PID",
		Handler: func(_ any, _ context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			if err := dec(new(emptypb.Empty)); err != nil {
				return nil, err
			}
			return wrapperspb.Int64(int64(os.Getpid())), nil
		},
	}},
}

// init serves the plugin in a process started with pluginEnv: on a unix
// socket in the private directory command.Hook gives it
// (PLUGIN_UNIX_SOCKET_DIR), whose address it prints on stdout, which is
// what command.Hook reads. On SIGTERM it finishes its calls and exits.
func init() {
	if os.Getenv(pluginEnv) != "1" {
		return
	}
	lis, err := net.Listen("unix", filepath.Join(os.Getenv("PLUGIN_UNIX_SOCKET_DIR"), "plugin.sock"))
	if err != nil {
		log.Fatal(err)
	}
	s := grpc.NewServer()
	s.RegisterService(&pluginService, struct{}{})
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	go func() {
		<-term
		s.GracefulStop()
	}()
	fmt.Println("unix://" + lis.Addr().String())
	if err := s.Serve(lis); err != nil {
		log.Fatal(err)
	}
	os.Exit(0)
}

// pluginCommand is the hook that execs this binary as the plugin.
func pluginCommand() *command.Hook {
	bin, err := os.Executable()
	if err != nil {
		log.Fatal(err)
	}
	return &command.Hook{Path: bin, Env: append(os.Environ(), pluginEnv+"=1")}
}

// pluginPID calls the plugin behind cc and returns the pid it answers with.
func pluginPID(ctx context.Context, cc grpc.ClientConnInterface) (int, error) {
	out := new(wrapperspb.Int64Value)
	if err := cc.Invoke(ctx, pidMethod, new(emptypb.Empty), out); err != nil {
		return 0, err
	}
	return int(out.GetValue()), nil
}

// killPluginOf SIGKILLs the current plugin, as the OOM killer would, and
// waits until it is gone.
func killPluginOf(rc *redial.Conn) *redial.Generation {
	g := rc.Current()
	p := g.Process()
	if err := syscall.Kill(p.PID, syscall.SIGKILL); err != nil {
		log.Fatal(err)
	}
	<-p.Done()
	return g
}

// A Conn keeps working after its plugin dies: the policy from package
// interceptor sees the failure, has redial start a new plugin and retries
// the call there.
func Example() {
	rc, err := redial.New(pluginCommand(),
		redial.WithPolicy(interceptor.New(interceptor.WithIdempotentMethods(pidMethod))))
	if err != nil {
		log.Fatal(err)
	}
	defer rc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	if _, err := pluginPID(ctx, rc); err != nil {
		log.Fatal(err)
	}
	fmt.Println("call 1: ok")

	killPluginOf(rc)
	fmt.Println("plugin killed")

	if _, err := pluginPID(ctx, rc); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("call 2: ok (generation %d)\n", rc.Current().Number())
	// Output:
	// call 1: ok
	// plugin killed
	// call 2: ok (generation 2)
}

// Without a policy a dead plugin is still replaced: Connect returns once
// its successor is live, and calls go to it.
func ExampleConn_Connect() {
	rc, err := redial.New(pluginCommand())
	if err != nil {
		log.Fatal(err)
	}
	defer rc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := rc.Connect(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("generation", rc.Current().Number())

	killPluginOf(rc)
	if err := rc.Connect(ctx); err != nil {
		log.Fatal(err)
	}
	g := rc.Current()
	fmt.Println("generation", g.Number())

	pid, err := pluginPID(ctx, rc)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("served by the new plugin:", pid == g.Process().PID)
	// Output:
	// generation 1
	// generation 2
	// served by the new plugin: true
}
