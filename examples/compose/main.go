//go:build unix

// Command compose shows respawn inside a go-grpc-middleware v2 chain, in
// the order respawn's docs/composing.md recommends, outermost first: mw logging (one
// line per call, with what the caller got), mw timeout (one deadline for
// the whole call, respawn's waits included), mw retry with
// retry.WithRetriable(interceptor.Retriable) (a live plugin's own
// Unavailable is retried, respawn's verdicts are not), all given through
// redial.WithDialOptions; then respawn's policy, which respawn.New installs
// innermost. respawn's events go to the same mw logger (redial/eventlog).
//
// The plugin is this very binary, exec'd with
// RESPAWN_COMPOSE_EXAMPLE_PLUGIN=1. Run it from the repository root:
//
//	go run ./examples/compose
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/logging"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/retry"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/selector"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/timeout"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/grpc-respawn/respawn"
	"github.com/grpc-respawn/respawn/interceptor"
	"github.com/grpc-respawn/respawn/redial"
	"github.com/grpc-respawn/respawn/redial/command"
	"github.com/grpc-respawn/respawn/redial/eventlog"
)

func main() {
	if os.Getenv(pluginEnv) == "1" {
		if err := servePlugin(); err != nil {
			fmt.Fprintln(os.Stderr, "plugin:", err)
			os.Exit(1)
		}
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := run(ctx, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "compose:", err)
		os.Exit(1)
	}
}

// run is the example; it writes what happens, and the log, to out.
func run(ctx context.Context, out io.Writer) error {
	out = &lockedWriter{w: out}
	logger := slogLogger(newSlog(out))
	self, err := os.Executable()
	if err != nil {
		return err
	}
	hook := &command.Hook{Path: self, Env: append(os.Environ(), pluginEnv+"=1"), Stderr: os.Stderr}
	// respawn.New probes the plugin's health, and those probes pass through
	// these interceptors too: interceptor.HostRPCs keeps them, and
	// respawn's other RPCs, out of the host's own log and retries.
	// Close does not wait for the event log: the last event, EventClosed,
	// says it has every line, Close's included.
	logEvent := eventlog.Handler(logger)
	logged := make(chan struct{})
	rc, err := respawn.New(hook,
		respawn.WithConn(
			redial.WithName("store"),
			redial.WithDialOptions(grpc.WithChainUnaryInterceptor(
				selector.UnaryClientInterceptor(logging.UnaryClientInterceptor(logger, logging.WithLogOnEvents(logging.FinishCall)), interceptor.HostRPCs),
				timeout.UnaryClientInterceptor(10*time.Second),
				selector.UnaryClientInterceptor(retry.UnaryClientInterceptor(retry.WithMax(3), retry.WithRetriable(interceptor.Retriable)), interceptor.HostRPCs),
			)),
			redial.WithEventHandler(func(e redial.Event) {
				logEvent(e)
				if e.Kind == redial.EventClosed {
					close(logged)
				}
			}),
		),
		respawn.WithCalls(interceptor.WithIdempotentMethods(readMethod)),
	)
	if err != nil {
		return err
	}
	defer rc.Close()
	if err := rc.Connect(ctx); err != nil {
		return err
	}
	pid := func() string { return fmt.Sprint(rc.Current().Process().PID) }

	fmt.Fprintln(out, "1. a read:")
	if err := call(ctx, out, rc, readMethod, "hello"); err != nil {
		return err
	}
	fmt.Fprintln(out, "2. a read the live plugin answers Unavailable once: mw retry sends it again, respawn leaves it alone:")
	if err := call(ctx, out, rc, readMethod, "busy"); err != nil {
		return err
	}
	fmt.Fprintln(out, "3. a read during which the plugin is SIGKILLed: respawn retries it on a new plugin, under the one deadline:")
	if err := call(ctx, out, rc, readMethod, "crash "+pid()); err != nil {
		return err
	}
	fmt.Fprintln(out, "4. a write during which the plugin is SIGKILLed: it may have run, so nobody retries it:")
	err = call(ctx, out, rc, writeMethod, "crash "+pid())
	if !errors.Is(err, interceptor.ErrOutcomeUnknown) {
		return fmt.Errorf("the write: got %v, want ErrOutcomeUnknown", err)
	}
	fmt.Fprintln(out, "5. the next write, on the new plugin:")
	if err := call(ctx, out, rc, writeMethod, "hello"); err != nil {
		return err
	}
	if err := rc.Close(); err != nil {
		return err
	}
	<-logged
	s := rc.Stats()
	fmt.Fprintf(out, "totals: %d plugin deaths, %d respawns, %d retries by respawn, %d outcome unknown\n",
		s.Crashes, s.Respawns, s.Retries, s.OutcomeUnknown)
	return nil
}

// call invokes method with req on cc and prints the answer, or the error,
// which it returns.
func call(ctx context.Context, out io.Writer, cc grpc.ClientConnInterface, method, req string) error {
	resp := new(wrapperspb.StringValue)
	if err := cc.Invoke(ctx, method, wrapperspb.String(req), resp); err != nil {
		fmt.Fprintf(out, "   -> %s(%q) failed: %v\n", method, req, err)
		return err
	}
	fmt.Fprintf(out, "   -> %s(%q): %s\n", method, req, resp.GetValue())
	return nil
}
