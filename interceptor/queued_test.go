//go:build unix

package interceptor_test

import (
	"context"
	"errors"
	"io"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/stats"

	"github.com/grpc-respawn/respawn/interceptor"
	"github.com/grpc-respawn/respawn/internal/respawntest"
	"github.com/grpc-respawn/respawn/internal/testpb"
	"github.com/grpc-respawn/respawn/redial"
	"github.com/grpc-respawn/respawn/redial/command"
)

// TestQueuedCallReleasedByDeath: a call that waits in grpc-go's picker
// (WaitForReady) for a plugin whose server is gone never reached it; when
// the plugin's process exits and redial closes the dead connection, which
// releases the call, it is sent to the successor, once, although it is not
// idempotent. Each kind of call: a unary call, and the opening of a server
// and of a client stream.
func TestQueuedCallReleasedByDeath(t *testing.T) {
	for _, tc := range queuedCalls {
		t.Run(tc.name, func(t *testing.T) {
			begun := &rpcSignal[*stats.Begin]{c: make(chan struct{}, 1)}
			h := newHost(t, nil, []redial.Option{redial.WithDialOptions(grpc.WithStatsHandler(begun))})
			// A plugin whose server can die before its process: the
			// process redial watches is a shell that runs the test
			// plugin, then waits.
			wrapper := &command.Hook{Path: "/bin/sh", Args: append([]string{"-c", `"$@"; exec sleep 600`, "sh", h.cmd.Path}, h.cmd.Args...)}
			h.swapHook(wrapper)
			ctx := respawntest.Context(t, 20*time.Second)
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
			// The server is gone, the process lives: the call waits in the
			// picker of g's connection.
			type result struct {
				pid int64
				err error
			}
			select {
			case <-begun.c: // the Get's
			default:
			}
			done := make(chan result, 1)
			go func() {
				pid, err := tc.call(ctx, h.client, "q")
				done <- result{pid, err}
			}()
			select {
			case <-begun.c:
			case <-ctx.Done():
				t.Fatal("the call never reached grpc-go")
			}
			respawntest.Kill(t, g) // redial closes the dead connection
			r := <-done
			if r.err != nil {
				t.Fatalf("the call released by the death: %v, want it sent to the successor", r.err)
			}
			if r.pid == resp.GetPid() {
				t.Errorf("answered by pid %d, the killed server", r.pid)
			}
			if n := h.executions(t, "q"); n != 1 {
				t.Errorf("the call ran %d times, want 1", n)
			}
		})
	}
}

// notIdempotent are the options of a call that waits for its plugin
// (WaitForReady) and is not idempotent.
var notIdempotent = []grpc.CallOption{grpc.WaitForReady(true), interceptor.Idempotent(false)}

// queuedCalls are the kinds of call that may wait in grpc-go's picker: a
// unary call, and the opening of a server and of a client stream, each
// not idempotent. call returns the pid of the plugin that answered.
var queuedCalls = []struct {
	name string
	call func(ctx context.Context, c testpb.TestClient, id string) (pid int64, err error)
}{
	{"unary", func(ctx context.Context, c testpb.TestClient, id string) (int64, error) {
		resp, err := c.Append(ctx, &testpb.AppendRequest{Id: id}, notIdempotent...)
		return resp.GetPid(), err
	}},
	{"server stream", func(ctx context.Context, c testpb.TestClient, id string) (int64, error) {
		stream, err := c.Watch(ctx, &testpb.WatchRequest{Id: id, Count: 1}, notIdempotent...)
		if err != nil {
			return 0, err
		}
		resp, err := stream.Recv()
		if err != nil {
			return 0, err
		}
		if _, err := stream.Recv(); err != io.EOF {
			return 0, err
		}
		return resp.GetPid(), nil
	}},
	{"client stream", func(ctx context.Context, c testpb.TestClient, id string) (int64, error) {
		stream, err := c.Collect(ctx, notIdempotent...)
		if err != nil {
			return 0, err
		}
		if err := stream.Send(&testpb.CollectRequest{Id: id}); err != nil {
			return 0, err
		}
		resp, err := stream.CloseAndRecv()
		return resp.GetPid(), err
	}},
}

// TestQueuedRetryInside: a retry layer between respawn and grpc-go may hide,
// behind the closing of the dead connection that released its last attempt
// from the picker, an earlier attempt that reached the plugin: a killed
// write then stays an outcome unknown, and runs once.
func TestQueuedRetryInside(t *testing.T) {
	h := newHostRetryInside(t, true)
	err := h.killMidCall(t, "w", func(ctx context.Context) error {
		_, err := h.client.Append(ctx, &testpb.AppendRequest{Id: "w", DelayMs: 5000}, grpc.WaitForReady(true))
		return err
	})
	if !errors.Is(err, interceptor.ErrOutcomeUnknown) {
		t.Errorf("got %v, want ErrOutcomeUnknown", err)
	}
	if n := h.executions(t, "w"); n != 1 {
		t.Errorf("the write ran %d times, want 1", n)
	}
}

// TestInFlightCallCutByRetire: a write in the handler of a live plugin that
// redial retires (replaced, its grace period over) fails in grpc-go with the
// text of the closing ClientConn, as a call queued in the picker does; but
// this one reached the plugin: it is an outcome unknown, and runs once.
func TestInFlightCallCutByRetire(t *testing.T) {
	h := newHost(t, nil, []redial.Option{redial.WithPacing(redial.Pacing{GracePeriod: -1})})
	ctx := respawntest.Context(t, 20*time.Second)
	errc := make(chan error, 1)
	go func() {
		_, err := h.client.Append(ctx, &testpb.AppendRequest{Id: "w", DelayMs: 3000}, interceptor.Idempotent(false))
		errc <- err
	}()
	h.waitJournal(t, "w", 1)
	if _, err := h.handle.Replace(ctx, h.rc.Current(), errors.New("replaced while it serves")); err != nil {
		t.Fatal(err)
	}
	err := <-errc
	if !errors.Is(err, interceptor.ErrOutcomeUnknown) {
		t.Errorf("got %v, want ErrOutcomeUnknown", err)
	}
	if err := h.rc.Close(); err != nil { // waits for the retired plugin's stop
		t.Fatal(err)
	}
	if n := h.executions(t, "w"); n != 1 {
		t.Errorf("the write ran %d times, want 1", n)
	}
}
