//go:build unix

package interceptor_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/retry"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/grpc-respawn/respawn/interceptor"
	"github.com/grpc-respawn/respawn/internal/plugintest"
	"github.com/grpc-respawn/respawn/internal/respawntest"
	"github.com/grpc-respawn/respawn/internal/testpb"
	"github.com/grpc-respawn/respawn/redial"
	"github.com/grpc-respawn/respawn/redial/command"
)

// retryPolicy is the service config a host may set by default.
const retryPolicy = `{"methodConfig": [{
	"name": [{"service": "respawn.test.v1.Test"}],
	"retryPolicy": {"maxAttempts": 3, "initialBackoff": "0.01s", "maxBackoff": "0.1s",
		"backoffMultiplier": 2, "retryableStatusCodes": ["UNAVAILABLE"]}
}]}`

// layered builds a host whose connections carry another retry layer or a
// setting that changes how calls wait.
type layered struct {
	name string
	new  func(t *testing.T) *host
}

func withDialOptions(opts ...grpc.DialOption) func(t *testing.T) *host {
	return func(t *testing.T) *host { return newHost(t, nil, []redial.Option{redial.WithDialOptions(opts...)}) }
}

var layers = []layered{
	{"go-grpc-middleware retry outside", withDialOptions(grpc.WithChainUnaryInterceptor(retry.UnaryClientInterceptor(retry.WithMax(3))))},
	{"go-grpc-middleware retry outside with Retriable", withDialOptions(grpc.WithChainUnaryInterceptor(
		retry.UnaryClientInterceptor(retry.WithMax(3), retry.WithRetriable(interceptor.Retriable))))},
	{"go-grpc-middleware retry inside", func(t *testing.T) *host { return newHostRetryInside(t, true) }},
	{"service config retryPolicy", withDialOptions(grpc.WithDefaultServiceConfig(retryPolicy))},
	{"WaitForReady by default", withDialOptions(grpc.WithDefaultCallOptions(grpc.WaitForReady(true)))},
}

// newHostRetryInside dials each plugin itself with respawn's interceptors
// first and go-grpc-middleware's retry after them, between respawn and
// grpc-go: every attempt respawn makes may be several attempts of the
// retry layer. Without withProcess, the hook reports no process, so that
// only the connection tells of a death.
func newHostRetryInside(t *testing.T, withProcess bool) *host {
	h, _ := newHostRetryInsideProc(t, withProcess)
	return h
}

// newHostRetryInsideProc is newHostRetryInside that also returns the process
// of the latest plugin, which the hook may keep from redial.
func newHostRetryInsideProc(t *testing.T, withProcess bool) (*host, *atomic.Pointer[redial.Process]) {
	var last atomic.Pointer[redial.Process]
	t.Helper()
	bin := plugintest.BuildOnce(t)
	journal := filepath.Join(t.TempDir(), "journal")
	h := &host{journal: journal, events: &respawntest.Events{}}
	h.cmd = &command.Hook{Path: bin, Args: []string{"-journal", journal}}
	hook := respawntest.RespawnerFunc(func(ctx context.Context, req redial.Request) (redial.Backend, error) {
		b, err := h.cmd.Respawn(ctx, req)
		if err != nil {
			return b, err
		}
		opts := append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, req.DialOptions...)
		opts = append(opts, grpc.WithChainUnaryInterceptor(retry.UnaryClientInterceptor(retry.WithMax(3))))
		if b.Conn, err = grpc.NewClient(b.Target, opts...); err != nil {
			_ = b.Stop()
			return redial.Backend{}, err
		}
		last.Store(b.Process)
		if !withProcess {
			b.Process = nil
		}
		return b, nil
	})
	rc, err := redial.New(hook, redial.WithPolicy(interceptor.New()), redial.WithEventHandler(h.events.Add))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rc.Close() })
	if err := rc.Connect(respawntest.Context(t, 20*time.Second)); err != nil {
		t.Fatalf("Connect: %v", err)
	}
	h.rc, h.client = rc, testpb.NewTestClient(rc)
	return h, &last
}

// TestRetryLayers: with another retry layer in the chain, outside respawn or
// inside it, grpc-go's own retry policy, or WaitForReady by default, a
// killed plugin is replaced, idempotent calls survive, and a killed write
// runs at most once.
func TestRetryLayers(t *testing.T) {
	for _, l := range layers {
		t.Run(l.name, func(t *testing.T) {
			t.Run("write killed mid-call", func(t *testing.T) {
				h := l.new(t)
				err := h.killMidCall(t, "w", func(ctx context.Context) error {
					_, err := h.client.Append(ctx, &testpb.AppendRequest{Id: "w", DelayMs: 5000})
					return err
				})
				if !errors.Is(err, interceptor.ErrOutcomeUnknown) {
					t.Errorf("got %v, want ErrOutcomeUnknown", err)
				}
				if n := h.executions(t, "w"); n != 1 {
					t.Errorf("the write ran %d times, want 1", n)
				}
				checkServes(t, h, 1)
			})
			t.Run("read killed mid-call", func(t *testing.T) {
				h := l.new(t)
				err := h.killMidCall(t, "r", func(ctx context.Context) error {
					_, err := h.client.Get(ctx, &testpb.GetRequest{Id: "r", DelayMs: 1000})
					return err
				})
				if err != nil {
					t.Errorf("got %v, want the read answered by the new plugin", err)
				}
				checkServes(t, h, 1)
			})
			t.Run("killed between calls", func(t *testing.T) {
				h := l.new(t)
				respawntest.Kill(t, h.rc.Current())
				checkServes(t, h, 1)
			})
		})
	}
}

// TestRetryInsideWithoutProcess: a retry layer between respawn and grpc-go
// turns a killed call's "error reading from server" into the "connection
// refused" of its last attempt on the dead plugin. Without a process to
// watch, respawn must not take that for a call never sent.
func TestRetryInsideWithoutProcess(t *testing.T) {
	h, proc := newHostRetryInsideProc(t, false)
	if h.rc.Current().Process() != nil {
		t.Fatal("redial knows the process")
	}
	errc := make(chan error, 1)
	go func() {
		_, err := h.client.Append(respawntest.Context(t, 20*time.Second), &testpb.AppendRequest{Id: "w", DelayMs: 5000})
		errc <- err
	}()
	h.waitJournal(t, "w", 1)
	p := proc.Load()
	if err := syscall.Kill(p.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; !errors.Is(err, interceptor.ErrOutcomeUnknown) {
		t.Errorf("got %v, want ErrOutcomeUnknown", err)
	}
	if n := h.executions(t, "w"); n != 1 {
		t.Errorf("the write ran %d times, want 1", n)
	}
}

// checkServes makes 5 reads and 5 writes, which must all succeed, each write
// once, and then that respawns plugins replaced the first.
func checkServes(t *testing.T, h *host, respawns uint64) {
	t.Helper()
	for i := range 5 {
		ctx := respawntest.Context(t, 20*time.Second)
		if _, err := h.client.Get(ctx, &testpb.GetRequest{}); err != nil {
			t.Fatalf("read %d: %v", i, err)
		}
		id := fmt.Sprintf("later-%d", i)
		if _, err := h.client.Append(ctx, &testpb.AppendRequest{Id: id}); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
		if n := h.executions(t, id); n != 1 {
			t.Errorf("%s ran %d times, want 1", id, n)
		}
	}
	_ = h.rc.Close()
	if got := h.rc.Stats().Respawns; got != respawns {
		t.Errorf("respawns = %d, want %d", got, respawns)
	}
}

// TestGRPCRetryIsOff: respawn turns grpc-go's retries off on its
// connections, whatever the service config says, so that they are made by
// the one layer that knows whether the plugin died: a live plugin's own
// Unavailable runs once, not once per attempt of the retryPolicy.
func TestGRPCRetryIsOff(t *testing.T) {
	h := newHost(t, []string{"-upstream", refusingUpstream(t).target},
		[]redial.Option{redial.WithDialOptions(grpc.WithDefaultServiceConfig(retryPolicy))})
	if _, err := h.client.Append(respawntest.Context(t, 20*time.Second), &testpb.AppendRequest{Id: "w"}); err == nil {
		t.Fatal("Append through a plugin whose backend is down succeeded")
	}
	if n := h.executions(t, "w"); n != 1 {
		t.Errorf("the write ran %d times, want 1", n)
	}
}
