//go:build linux

// Command standbydemo shows the ways respawn replaces a plugin faster than,
// or before, a crash: it SIGKILLs a plugin three times without and three
// times with a spare (redial.Pacing.Spares) and prints the time from each
// kill to the first successful call; then it runs a plugin that leaks
// 4 MiB per call with redial.Pacing.Recycle and a 96 MiB watermark, and shows
// it replaced by a planned rotation as it passes the watermark, with no
// call failing. The plugin is this very binary, exec'd with
// RESPAWN_STANDBYDEMO_PLUGIN=1. Run it from the repository root:
//
//	go run ./examples/standbydemo
//
// Linux only: recycling by resident memory reads /proc/<pid>/status, which
// other systems do not have (redial.Recycle's RSS limit is unavailable
// there).
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"
	"syscall"
	"time"

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
		fmt.Fprintln(os.Stderr, "standbydemo:", err)
		os.Exit(1)
	}
}

// run is the demo; it writes what happens to out.
func run(ctx context.Context, out io.Writer) error {
	out = &lockedWriter{w: out} // the event handlers write to it too
	self, err := os.Executable()
	if err != nil {
		return err
	}
	for _, spares := range []int{0, 1} {
		if err := kills(ctx, out, self, spares); err != nil {
			return err
		}
	}
	return leak(ctx, out, self)
}

// hook execs this binary as the plugin, leaking leak bytes per call.
func hook(self string, leak int) *command.Hook {
	env := append(os.Environ(), pluginEnv+"=1", fmt.Sprintf("%s=%d", leakEnv, leak))
	return &command.Hook{Path: self, Env: env, Stderr: os.Stderr}
}

// kills SIGKILLs the plugin three times and prints how long each recovery
// took, from the kill to the first successful call.
func kills(ctx context.Context, out io.Writer, self string, spares int) error {
	ready := make(chan int, 16)
	closed := make(chan struct{}) // closed with the last event
	events := func(e redial.Event) {
		switch {
		case e.Kind == redial.EventStandby && e.Err == nil:
			ready <- e.Exit.PID
		case e.Kind == redial.EventRespawnDone && e.Spare:
			fmt.Fprintf(out, "    spare promoted to generation %d in %v\n", e.Generation, e.Duration.Round(time.Microsecond))
		case e.Kind == redial.EventClosed:
			close(closed)
		}
	}
	rc, err := respawn.New(hook(self, 0),
		respawn.WithCalls(interceptor.WithIdempotentMethods(pidMethod)),
		respawn.WithConn(redial.WithPacing(redial.Pacing{Spares: spares}), redial.WithEventHandler(events)))
	if err != nil {
		return err
	}
	defer rc.Close()
	if _, err := callPID(ctx, rc); err != nil {
		return err
	}
	fmt.Fprintf(out, "\n%d spare(s):\n", spares)
	for i := 1; i <= 3; i++ {
		if spares > 0 {
			select { // the spare for this kill
			case pid := <-ready:
				fmt.Fprintf(out, "  spare ready: pid %d\n", pid)
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		pid := rc.Current().Process().PID
		began := time.Now()
		_ = syscall.Kill(pid, syscall.SIGKILL)
		answered, err := callPID(ctx, rc)
		if err != nil {
			return fmt.Errorf("call after kill %d: %w", i, err)
		}
		fmt.Fprintf(out, "  kill %d: pid %d SIGKILLed; first call answered by pid %d %v later\n",
			i, pid, answered, time.Since(began).Round(time.Microsecond))
	}
	err = rc.Close()
	<-closed // the handler writes to out no more
	return err
}

// exitText says how a plugin ended: "pid 42 exited with code 0, retired".
func exitText(e redial.Exit) string {
	if e.Signal != 0 {
		return fmt.Sprintf("pid %d killed by signal %d (%v), %s", e.PID, int(e.Signal), e.Signal, e.Reason)
	}
	return fmt.Sprintf("pid %d exited with code %d, %s", e.PID, e.Code, e.Reason)
}

// leak runs a plugin that keeps 4 MiB per call, recycled at 96 MiB.
func leak(ctx context.Context, out io.Writer, self string) error {
	const perCall, watermark = 4 << 20, 96 << 20
	fmt.Fprintf(out, "\na plugin that leaks %d MiB per call, recycled past %d MiB of resident memory:\n", perCall>>20, watermark>>20)
	closed := make(chan struct{}) // closed with the last event
	events := func(e redial.Event) {
		switch {
		case e.Kind == redial.EventClosed:
			close(closed)
		case e.Kind == redial.EventRespawnStart && e.Planned && e.Err != nil: // why it is recycled
			fmt.Fprintf(out, "  ~ %v\n", e.Err)
		case e.Kind == redial.EventRespawnDone && e.Planned && e.Err == nil:
			fmt.Fprintf(out, "  ~ generation %d took over in %v\n", e.Generation, e.Duration.Round(time.Millisecond))
		case e.Kind == redial.EventExit && e.Exit.Reason == redial.ExitCrashed:
			fmt.Fprintf(out, "  ! generation %d: %v\n", e.Generation, e.Exit)
		case e.Kind == redial.EventExit:
			fmt.Fprintf(out, "  - generation %d: %s\n", e.Generation, exitText(e.Exit))
		}
	}
	rc, err := respawn.New(hook(self, perCall),
		respawn.WithCalls(interceptor.WithIdempotentMethods(pidMethod)),
		respawn.WithConn(redial.WithEventHandler(events), redial.WithPacing(redial.Pacing{GracePeriod: 100 * time.Millisecond}),
			redial.WithPacing(redial.Pacing{Recycle: redial.Recycle{RSS: watermark, Check: 10 * time.Millisecond}})))
	if err != nil {
		return err
	}
	defer rc.Close()
	failed := 0
	for i := 1; i <= 60; i++ {
		pid, err := callPID(ctx, rc)
		if err != nil {
			failed++
			fmt.Fprintf(out, "  call %d FAILED: %v\n", i, err)
			continue
		}
		if i%10 == 0 {
			fmt.Fprintf(out, "  call %d: answered by pid %d\n", i, pid)
		}
		time.Sleep(5 * time.Millisecond) // a host's pace, so that the demo can be followed
	}
	if err := rc.Close(); err != nil {
		return err
	}
	<-closed // the handler has printed every exit, Close's included
	s := rc.Stats()
	fmt.Fprintf(out, "\ntotals: 60 calls, %d failed, %d rotations, %d crashes\n", failed, s.Rotations, s.Crashes)
	if failed > 0 || s.Crashes > 0 || s.Rotations == 0 {
		return fmt.Errorf("%d calls failed, %d crashes, %d rotations (want 0, 0, at least 1)", failed, s.Crashes, s.Rotations)
	}
	return nil
}

// lockedWriter serialises writes to w: the demo and its event handlers,
// which redial runs on a goroutine of its own, write to the same output.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
