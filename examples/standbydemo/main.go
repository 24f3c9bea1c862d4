//go:build linux

// Command standbydemo shows the three ways respawn replaces a plugin faster
// than, or before, a crash: it SIGKILLs a plugin three times without and
// three times with a spare (redial.WithStandby) and prints the time from
// each kill to the first successful call; then it runs a plugin that leaks
// 4 MiB per call with redial.WithRecycle and a 96 MiB watermark, and shows
// it replaced by a planned rotation before the watermark is far behind,
// with no call failing. Run it from the repository root:
//
//	go run ./examples/standbydemo
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/grpc-respawn/respawn/interceptor"
	"github.com/grpc-respawn/respawn/internal/plugintest"
	"github.com/grpc-respawn/respawn/internal/testpb"
	"github.com/grpc-respawn/respawn/redial"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "standbydemo:", err)
		os.Exit(1)
	}
}

func run() error {
	dir, err := os.MkdirTemp("", "standbydemo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	fmt.Println("building the test plugin …")
	bin, err := plugintest.Build(dir)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, spares := range []int{0, 1} {
		if err := kills(ctx, bin, spares); err != nil {
			return err
		}
	}
	return leak(ctx, bin)
}

// kills SIGKILLs the plugin three times and prints how long each recovery
// took, from the kill to the first successful call.
func kills(ctx context.Context, bin string, spares int) error {
	ready := make(chan int, 16)
	events := func(e redial.Event) {
		switch e.Kind {
		case redial.EventStandbyReady:
			ready <- e.Exit.PID
		case redial.EventStandbyTaken:
			fmt.Printf("    spare promoted to generation %d in %v\n", e.Generation, e.Duration.Round(time.Microsecond))
		}
	}
	rc, err := redial.New(&redial.Command{Path: bin}, redial.WithPolicy(interceptor.New()),
		redial.WithStandby(spares), redial.WithEventHandler(events))
	if err != nil {
		return err
	}
	defer rc.Close()
	if err := rc.Connect(ctx); err != nil {
		return err
	}
	client := testpb.NewTestClient(rc)
	if _, err := client.Get(ctx, &testpb.GetRequest{}); err != nil {
		return err
	}
	fmt.Printf("\n%d spare(s):\n", spares)
	for i := 1; i <= 3; i++ {
		if spares > 0 {
			select { // the spare for this kill
			case pid := <-ready:
				fmt.Printf("  spare ready: pid %d\n", pid)
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		pid := rc.Current().Process().PID()
		began := time.Now()
		_ = syscall.Kill(pid, syscall.SIGKILL)
		resp, err := client.Get(ctx, &testpb.GetRequest{})
		if err != nil {
			return fmt.Errorf("call after kill %d: %w", i, err)
		}
		fmt.Printf("  kill %d: pid %d SIGKILLed; first call answered by pid %d %v later\n",
			i, pid, resp.GetPid(), time.Since(began).Round(time.Microsecond))
	}
	return nil
}

// leak runs a plugin that keeps 4 MiB per call, recycled at 96 MiB.
func leak(ctx context.Context, bin string) error {
	const watermark = 96 << 20
	fmt.Printf("\na plugin that leaks 4 MiB per call, recycled past %d MiB of resident memory:\n", watermark>>20)
	events := func(e redial.Event) {
		var re *redial.RecycleError
		switch {
		case e.Kind == redial.EventRotate && errors.As(e.Err, &re):
			fmt.Printf("  ~ %v; generation %d took over in %v\n", re, e.Generation, e.Duration.Round(time.Millisecond))
		case e.Kind == redial.EventExit:
			fmt.Printf("  ! generation %d: %v\n", e.Generation, e.Exit)
		}
	}
	hook := &redial.Command{Path: bin, Args: []string{"-leak-per-call", fmt.Sprint(4 << 20)}}
	rc, err := redial.New(hook, redial.WithPolicy(interceptor.New()), redial.WithEventHandler(events),
		redial.WithGracePeriod(100*time.Millisecond), redial.WithRecycle(0, 0, watermark, 10*time.Millisecond))
	if err != nil {
		return err
	}
	defer rc.Close()
	client := testpb.NewTestClient(rc)
	failed := 0
	for i := 1; i <= 60; i++ {
		resp, err := client.Get(ctx, &testpb.GetRequest{})
		if err != nil {
			failed++
			fmt.Printf("  call %d FAILED: %v\n", i, err)
			continue
		}
		if i%10 == 0 {
			fmt.Printf("  call %d: answered by pid %d\n", i, resp.GetPid())
		}
		time.Sleep(5 * time.Millisecond) // a host's pace, so the demo can be followed
	}
	s := rc.Stats()
	fmt.Printf("\ntotals: 60 calls, %d failed, %d rotations, %d crashes\n", failed, s.Rotations, s.Crashes)
	if failed > 0 {
		return fmt.Errorf("%d calls failed", failed)
	}
	return nil
}
