//go:build unix

// Command killdemo shows respawn at work: it starts a plugin (this very
// binary, exec'd with RESPAWN_KILLDEMO_PLUGIN=1), calls it in a loop,
// SIGKILLs it three times in the middle of a call, then replaces it on
// purpose, and logs with log/slog what respawn did: which plugin died, why,
// how long the respawn took and which calls were retried — or, for a write,
// why it was not. Run it from the repository root:
//
//	go run ./examples/killdemo
//
// It needs nothing but respawn, grpc-go and protobuf's well-known types:
// copy it as it is.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/grpc-respawn/respawn"
	"github.com/grpc-respawn/respawn/interceptor"
	"github.com/grpc-respawn/respawn/redial"
	"github.com/grpc-respawn/respawn/redial/command"
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
		fmt.Fprintln(os.Stderr, "killdemo:", err)
		os.Exit(1)
	}
}

// run is the demo; it writes what happens, and respawn's log, to out.
func run(ctx context.Context, out io.Writer) error {
	out = &lockedWriter{w: out}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	stderr := newArrivals(os.Stderr)
	logged := make(chan struct{}) // closed with the last event: Close does not wait for the log
	hook := &command.Hook{Path: self, Env: append(os.Environ(), pluginEnv+"=1"), Stderr: stderr}
	rc, err := respawn.New(hook,
		respawn.WithConn(redial.WithName("objectstore"), redial.WithEventHandler(eventLogger(out, logged))),
		respawn.WithCalls(interceptor.WithIdempotentMethods(readMethod)))
	if err != nil {
		return err
	}
	defer rc.Close()
	if err := rc.Connect(ctx); err != nil {
		return err
	}
	fmt.Fprintf(out, "plugin started: pid %d\n", rc.Current().Process().PID)

	var readsFailed, writesUnknown int
	for call := 1; call <= 12; call++ {
		method, what := readMethod, "read"
		if call == 6 || call == 8 {
			method, what = writeMethod, "write"
		}
		id := fmt.Sprint("call-", call)
		res := make(chan error, 1)
		var pid int64
		go func() {
			var err error
			pid, err = invoke(withCallID(ctx, id), rc, method, id)
			res <- err
		}()
		if call%4 == 0 { // kill the plugin while it works on the call
			if err := stderr.wait(ctx, id); err != nil {
				return err
			}
			victim := rc.Current().Process()
			fmt.Fprintf(out, "call %d (%s) is in flight: killing plugin pid %d with SIGKILL\n", call, what, victim.PID)
			if err := kill(ctx, victim); err != nil {
				return err
			}
		}
		err := <-res
		switch {
		case err == nil:
			fmt.Fprintf(out, "call %d (%s): ok, answered by pid %d\n", call, what, pid)
		case errors.Is(err, interceptor.ErrOutcomeUnknown):
			writesUnknown++
			fmt.Fprintf(out, "call %d (%s): not retried, as it may have run: %v\n", call, what, err)
		default:
			readsFailed++
			fmt.Fprintf(out, "call %d (%s): FAILED: %v\n", call, what, err)
		}
	}

	// A planned replacement, as for a binary upgrade: the old plugin is
	// retired by redial, not killed, and no call notices.
	fmt.Fprintf(out, "rotating plugin pid %d, as for an upgrade\n", rc.Current().Process().PID)
	if err := rc.Rotate(ctx); err != nil {
		return err
	}
	pid, err := invoke(withCallID(ctx, "call-13"), rc, readMethod, "call-13")
	if err != nil {
		return fmt.Errorf("call after the rotation: %w", err)
	}
	fmt.Fprintf(out, "call 13 (read): ok, answered by pid %d\n", pid)
	if err := rc.Close(); err != nil {
		return err
	}
	<-logged // the event log has every line, Close's included
	s := rc.Stats()
	fmt.Fprintf(out, "\ntotals: %d plugin deaths, %d respawns, %d retries, %d outcome unknown, %d rotation, %d reads failed\n",
		s.Crashes, s.Respawns, s.Retries, s.OutcomeUnknown, s.Rotations, readsFailed)
	if readsFailed > 0 || writesUnknown != 1 {
		return fmt.Errorf("%d reads failed, %d writes cut short (want 0 and 1)", readsFailed, writesUnknown)
	}
	return nil
}

// invoke calls method on cc with the call id and returns the pid of the
// plugin that answered.
func invoke(ctx context.Context, cc grpc.ClientConnInterface, method, id string) (int64, error) {
	out := new(wrapperspb.Int64Value)
	if err := cc.Invoke(ctx, method, wrapperspb.String(id), out); err != nil {
		return 0, err
	}
	return out.GetValue(), nil
}

// kill kills p from outside with SIGKILL, as the OOM killer would, and
// waits for it to be reaped.
func kill(ctx context.Context, p *redial.Process) error {
	proc, err := os.FindProcess(p.PID)
	if err == nil {
		err = proc.Kill()
	}
	if err != nil {
		return err
	}
	select {
	case <-p.Done():
		return nil
	case <-ctx.Done():
		return fmt.Errorf("plugin pid %d not reaped: %w", p.PID, ctx.Err())
	}
}
