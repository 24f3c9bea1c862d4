//go:build unix

package interceptor_test

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/stats"

	"github.com/grpc-respawn/respawn/internal/respawntest"
	"github.com/grpc-respawn/respawn/internal/testpb"
	"github.com/grpc-respawn/respawn/redial"
	"github.com/grpc-respawn/respawn/redial/command"
)

// TestQueuedCallReleasedAfterReplace: a write queued in grpc-go's picker
// (WaitForReady) on a plugin whose server is gone never reached it. The
// plugin is replaced while its process still runs, and then its process
// exits: the retired plugin's stop and the exit's release both close its
// connection, and whichever comes first, the write is sent to the
// successor, once. Each kind of call, in rounds, since the two race.
func TestQueuedCallReleasedAfterReplace(t *testing.T) {
	for _, tc := range queuedCalls {
		t.Run(tc.name, func(t *testing.T) { queuedAfterReplace(t, tc.call) })
	}
}

func queuedAfterReplace(t *testing.T, call func(ctx context.Context, c testpb.TestClient, id string) (int64, error)) {
	const rounds = 8
	begun := &rpcSignal[*stats.Begin]{c: make(chan struct{}, 1)}
	h := newHost(t, nil, []redial.Option{redial.WithDialOptions(grpc.WithStatsHandler(begun))})
	// A plugin whose server can die before its process: the process redial
	// watches is a shell that runs the test plugin, then waits.
	h.swapHook(&command.Hook{Path: "/bin/sh", Args: append([]string{"-c", `"$@"; exec sleep 600`, "sh", h.cmd.Path}, h.cmd.Args...)})
	ctx := respawntest.Context(t, 60*time.Second)
	for i := range rounds {
		g, err := h.handle.Replace(ctx, h.rc.Current(), errors.New("run the wrapped plugin"))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := h.client.Get(ctx, &testpb.GetRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if err := syscall.Kill(int(resp.GetPid()), syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		waitLeftReady(t, g)
		select {
		case <-begun.c: // the Get's
		default:
		}
		id := fmt.Sprint("q", i)
		errc := make(chan error, 1)
		go func() {
			_, err := call(ctx, h.client, id)
			errc <- err
		}()
		select {
		case <-begun.c:
		case <-ctx.Done():
			t.Fatal("the call never reached grpc-go")
		}
		if _, err := h.handle.Replace(ctx, g, errors.New("replaced while its process runs")); err != nil {
			t.Fatal(err)
		}
		respawntest.Kill(t, g)
		if err := <-errc; err != nil {
			t.Errorf("round %d: the queued write: %v; want it sent to the successor", i, err)
		}
		if n := h.executions(t, id); n != 1 {
			t.Errorf("round %d: the queued write ran %d times, want 1", i, n)
		}
	}
}
