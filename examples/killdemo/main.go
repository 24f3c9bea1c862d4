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
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/grpc-respawn/respawn"
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

	// What respawn did, as an operator reads it in a log: which plugin,
	// why it died (a signal from outside, or stopped by redial), how long
	// the respawn took, which calls were retried.
	log := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{} // the demo's output reads better without
			}
			return a
		},
	}))
	events := func(e redial.Event) {
		switch {
		case e.Kind == redial.EventExit && e.Exit.Reason == redial.ExitCrashed:
			log.Warn("  ! plugin died", "event", e)
		case e.Kind == redial.EventExit:
			log.Info("  - plugin stopped by redial", "event", e)
		case e.Kind == redial.EventRespawnDone && e.Err != nil:
			log.Warn("  ! respawn failed", "event", e)
		case e.Kind == redial.EventRespawnDone && e.Generation > 1:
			log.Info("  + plugin respawned", "event", e)
		case e.Kind == redial.EventRetry:
			log.Info("  ~ call retried on the new plugin", "event", e)
		}
	}
	journal := filepath.Join(dir, "journal") // the plugin notes each call it receives
	hook := &redial.Command{Path: bin, Args: []string{"-journal", journal}, Stderr: os.Stderr}
	rc, err := respawn.New(hook, respawn.WithConn(redial.WithName("objectstore"), redial.WithEventHandler(events)))
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
		ok, failed, s.Crashes, s.Respawns, s.Retries)
	if failed > 0 {
		return fmt.Errorf("%d calls failed", failed)
	}
	return nil
}
