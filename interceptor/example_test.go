//go:build unix

package interceptor_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/grpc-respawn/respawn/interceptor"
	"github.com/grpc-respawn/respawn/redial"
	"github.com/grpc-respawn/respawn/redial/command"
)

// The example's plugin is the example's own binary, started with pluginEnv
// set; arrivalsEnv names the unix socket on which it tells the host that a
// call reached its handler.
const (
	pluginEnv   = "RESPAWN_INTERCEPTOR_EXAMPLE_PLUGIN"
	arrivalsEnv = "RESPAWN_INTERCEPTOR_EXAMPLE_ARRIVALS"
)

// The plugin's RPCs take a call id and answer with the plugin's pid. Get
// only reads; Append changes something.
const (
	storeGet    = "/example.Store/Get"
	storeAppend = "/example.Store/Append"
)

// storeService describes the plugin's service by hand, as
// protoc-gen-go-grpc would, with protobuf well-known types.
var storeService = grpc.ServiceDesc{
	ServiceName: "example.Store",
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{
		{MethodName: "Get", Handler: handle},
		{MethodName: "Append", Handler: handle},
	},
}

// handle connects to the host's arrivals socket and answers once the host
// closes that connection, so the host can kill the plugin
// while the call is in its handler.
func handle(_ any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
	in := new(wrapperspb.StringValue)
	if err := dec(in); err != nil {
		return nil, err
	}
	c, err := new(net.Dialer).DialContext(ctx, "unix", os.Getenv(arrivalsEnv))
	if err != nil {
		return nil, err
	}
	defer c.Close()
	_, _ = io.Copy(io.Discard, c)
	return wrapperspb.Int64(int64(os.Getpid())), nil
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
	s.RegisterService(&storeService, struct{}{})
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

// The plugin is SIGKILLed, as the OOM killer would, while each call is in
// its handler. Get, declared idempotent, is retried on a new plugin and
// succeeds. Append is not declared, so it may have run: it fails with
// ErrOutcomeUnknown rather than run twice, and the next call finds a new
// plugin. WithIdempotencyFunc decides by request: an Append whose id says
// it may run twice is retried.
func Example() {
	dir, err := os.MkdirTemp("", "interceptor-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	arrivals := filepath.Join(dir, "arrivals.sock")
	lis, err := net.Listen("unix", arrivals)
	if err != nil {
		log.Fatal(err)
	}
	defer lis.Close()
	calls := make(chan net.Conn, 16)
	go accept(lis, calls)

	bin, err := os.Executable() // a real host knows its plugin's path
	if err != nil {
		log.Fatal(err)
	}
	rc, err := redial.New(&command.Hook{Path: bin, Env: append(os.Environ(), pluginEnv+"=1", arrivalsEnv+"="+arrivals)},
		redial.WithPolicy(interceptor.New(
			interceptor.WithIdempotentMethods(storeGet),
			interceptor.WithIdempotencyFunc(func(method string, req any) (idempotent, known bool) {
				id, ok := req.(*wrapperspb.StringValue)
				return ok && strings.HasPrefix(id.GetValue(), "idempotent-"), ok
			}))))
	if err != nil {
		log.Fatal(err)
	}
	defer rc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	call := func(method, id string) func() error {
		return func() error {
			return rc.Invoke(ctx, method, wrapperspb.String(id), new(wrapperspb.Int64Value))
		}
	}

	_, err = killedMidCall(ctx, rc, calls, call(storeGet, "get"))
	fmt.Println("Get:", err)

	runs, err := killedMidCall(ctx, rc, calls, call(storeAppend, "append-1"))
	fmt.Println("Append: outcome unknown:", errors.Is(err, interceptor.ErrOutcomeUnknown), "ran", runs, "time")

	runs, err = killedMidCall(ctx, rc, calls, call(storeAppend, "idempotent-append"))
	fmt.Println("Append, idempotent by its id:", err, "ran", runs, "times")
	fmt.Println("plugins started:", rc.Current().Number())
	// Output:
	// Get: <nil>
	// Append: outcome unknown: true ran 1 time
	// Append, idempotent by its id: <nil> ran 2 times
	// plugins started: 4
}

// accept reports each call that reaches a plugin's handler, as the
// connection whose closing lets it answer, until lis closes.
func accept(lis net.Listener, calls chan<- net.Conn) {
	for {
		c, err := lis.Accept()
		if err != nil {
			return
		}
		calls <- c
	}
}

// killedMidCall runs call, SIGKILLs the plugin once the call is in its
// handler, lets every later run of it answer, and returns call's error and
// how many times the call reached a handler.
func killedMidCall(ctx context.Context, rc *redial.Conn, calls <-chan net.Conn, call func() error) (int, error) {
	errc := make(chan error, 1)
	go func() { errc <- call() }()
	var first net.Conn
	select {
	case first = <-calls:
	case <-ctx.Done():
		log.Fatal(ctx.Err())
	}
	defer first.Close()
	if err := syscall.Kill(rc.Current().Process().PID, syscall.SIGKILL); err != nil {
		log.Fatal(err)
	}
	runs := 1
	for {
		select {
		case err := <-errc:
			return runs, err
		case a := <-calls:
			runs++
			a.Close()
		}
	}
}
