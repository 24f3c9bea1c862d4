//go:build unix

// Command killdemo shows respawn at work: it starts a plugin, calls it in a
// loop, SIGKILLs it three times in the middle of a call, and prints what
// happened. Run it from the repository root:
//
//	go run ./examples/killdemo
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/grpc-respawn/respawn/interceptor"
	"github.com/grpc-respawn/respawn/internal/plugintest"
	"github.com/grpc-respawn/respawn/internal/testpb"
	"github.com/grpc-respawn/respawn/redial"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "killdemo:", err)
		os.Exit(1)
	}
}

func run() error {
	dir, err := os.MkdirTemp("", "killdemo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	fmt.Println("building the test plugin …")
	bin, err := plugintest.Build(dir)
	if err != nil {
		return err
	}

	events := func(e redial.Event) {
		switch e.Kind {
		case redial.EventExit:
			fmt.Printf("  ! plugin generation %d: %v\n", e.Generation, e.Exit)
		case redial.EventRespawnDone:
			if e.Err != nil {
				fmt.Printf("  ! respawn failed after %v: %v\n", e.Duration.Round(time.Millisecond), e.Err)
			} else if e.Generation > 1 {
				fmt.Printf("  + respawned: generation %d ready in %v\n", e.Generation, e.Duration.Round(time.Millisecond))
			}
		case redial.EventRetry:
			fmt.Printf("  ~ retrying %s on generation %d (attempt %d)\n", e.Method, e.Generation, e.Attempt)
		}
	}
	journal := filepath.Join(dir, "journal") // the plugin notes each call it receives
	hook := &redial.Command{Path: bin, Args: []string{"-journal", journal}, Stderr: os.Stderr}
	rc, err := redial.New(hook, redial.WithPolicy(interceptor.New()), redial.WithEventHandler(events))
	if err != nil {
		return err
	}
	defer rc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := rc.Connect(ctx); err != nil {
		return err
	}
	fmt.Printf("plugin started: pid %d\n", rc.Current().Process().PID())

	client := testpb.NewTestClient(rc) // bound once, used across every respawn
	var ok, failed int
	for call := 1; call <= 12; call++ {
		killNow := call%4 == 0
		res := make(chan error, 1)
		var resp *testpb.GetResponse
		go func() {
			var err error
			resp, err = client.Get(ctx, &testpb.GetRequest{Id: fmt.Sprint("call-", call), DelayMs: 300})
			res <- err
		}()
		if killNow {
			// The journal shows the call once it has reached the plugin:
			// killing the plugin now kills it mid-call.
			id := fmt.Sprint("call-", call)
			if err := plugintest.WaitJournal(ctx, journal, func(j map[string]int) bool { return j[id] > 0 }); err != nil {
				return fmt.Errorf("call %s never reached the plugin: %w", id, err)
			}
			pid := rc.Current().Process().PID()
			fmt.Printf("call %d is in flight: killing plugin pid %d with SIGKILL\n", call, pid)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		if err := <-res; err != nil {
			failed++
			fmt.Printf("call %d: FAILED: %v\n", call, err)
			continue
		}
		ok++
		fmt.Printf("call %d: ok, answered by pid %d\n", call, resp.GetPid())
	}
	s := rc.Stats()
	fmt.Printf("\ntotals: %d calls ok, %d failed, %d plugin deaths, %d respawns, %d retries\n",
		ok, failed, s.Exits, s.Respawns, s.Retries)
	if failed > 0 {
		return fmt.Errorf("%d calls failed", failed)
	}
	return nil
}
