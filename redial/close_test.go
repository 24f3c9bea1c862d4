//go:build unix

package redial_test

import (
	"context"
	"errors"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grpc-respawn/respawn/internal/plugintest"
	"github.com/grpc-respawn/respawn/internal/respawntest"
	"github.com/grpc-respawn/respawn/internal/testpb"
	"github.com/grpc-respawn/respawn/redial"
	"github.com/grpc-respawn/respawn/redial/command"
)

func TestCloseDuringRespawn(t *testing.T) {
	entered := make(chan struct{})
	hook := respawntest.RespawnerFunc(func(ctx context.Context, _ redial.Request) (redial.Backend, error) {
		close(entered)
		<-ctx.Done()
		return redial.Backend{}, ctx.Err()
	})
	rc := newConn(t, hook)
	connected := make(chan error, 1)
	go func() { connected <- rc.Connect(respawntest.Context(t, 20*time.Second)) }()
	waitDone(t, entered, "hook entered")

	closed := make(chan error, 1)
	go func() { closed <- rc.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatalf("Close: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Close did not return")
	}

	var err error
	select {
	case err = <-connected:
	case <-time.After(20 * time.Second):
		t.Fatal("Connect did not return after Close")
	}
	if !errors.Is(err, redial.ErrClosed) {
		t.Errorf("Connect: got %v, want ErrClosed", err)
	}
	if got := status.Code(err); got != codes.Canceled {
		t.Errorf("Connect: code %v, want Canceled", got)
	}

	_, err = testpb.NewTestClient(rc).Get(respawntest.Context(t, 10*time.Second), &testpb.GetRequest{})
	if !errors.Is(err, redial.ErrClosed) || status.Code(err) != codes.Canceled {
		t.Errorf("Get after Close: got %v, want ErrClosed with code Canceled", err)
	}
	if err := rc.Connect(respawntest.Context(t, 10*time.Second)); !errors.Is(err, redial.ErrClosed) {
		t.Errorf("Connect after Close: got %v, want ErrClosed", err)
	}
	if err := rc.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// A respawn waiting out its backoff when Close is called must not run the
// hook at all.
func TestCloseDuringBackOff(t *testing.T) {
	var calls atomic.Int32
	hook := respawntest.RespawnerFunc(func(context.Context, redial.Request) (redial.Backend, error) {
		calls.Add(1)
		return redial.Backend{}, errors.New("cannot start")
	})
	rc := newConn(t, hook,
		redial.WithPacing(redial.Pacing{BackOff: func() backoff.BackOff { return backoff.NewConstantBackOff(time.Hour) }}))
	if err := rc.ConnectOnce(respawntest.Context(t, 20*time.Second)); err == nil {
		t.Fatal("Connect: got no error, want one")
	}
	redial.StartRespawn(rc, errors.New("try again")) // starts a respawn that backs off for an hour

	closed := make(chan error, 1)
	go func() { closed <- rc.Close() }()
	select {
	case <-closed:
	case <-time.After(20 * time.Second):
		t.Fatal("Close did not return while a respawn was backing off")
	}
	if got := calls.Load(); got != 1 {
		t.Errorf("hook called %d times, want 1 (none after Close)", got)
	}
}

func TestCloseStopsPlugin(t *testing.T) {
	plugin := newPluginHook(t)
	rc := newConn(t, plugin.Respawner())
	if err := rc.Connect(respawntest.Context(t, 20*time.Second)); err != nil {
		t.Fatalf("Connect: %v", err)
	}
	g := rc.Current()
	if err := rc.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	select {
	case <-g.Retired():
	default:
		t.Error("Retired() not closed by Close")
	}
	select {
	case <-g.Process().Done():
	default:
		t.Fatal("Close returned before the plugin was reaped")
	}
	assertReaped(t, g.Process().PID)
	waitShutdown(t, g.ClientConn())
}

// TestCloseFromStop: a Backend's Stop that closes its own Conn (a hook
// that tears everything down with its plugin) is run by Close; its Close
// returns at once instead of waiting for the Close that waits for it.
func TestCloseFromStop(t *testing.T) {
	bin := plugintest.BuildOnce(t)
	var rc *redial.Conn
	stopped := make(chan error, 1)
	hook := respawntest.RespawnerFunc(func(ctx context.Context, req redial.Request) (redial.Backend, error) {
		b, err := (&command.Hook{Path: bin, Stderr: os.Stderr}).Respawn(ctx, req)
		stop := b.Stop
		b.Stop = func() error {
			stopped <- rc.Close()
			return stop()
		}
		return b, err
	})
	rc, err := redial.New(hook)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if err := rc.Connect(respawntest.Context(t, 20*time.Second)); err != nil {
		_ = rc.Close()
		t.Fatalf("Connect: %v", err)
	}
	pid := rc.Current().Process().PID
	closed := make(chan error, 1)
	go func() { closed <- rc.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Errorf("Close: %v", err)
		}
	case <-time.After(respawntest.Timeout):
		t.Fatalf("Close, with a Stop that calls Close, did not return within %v", respawntest.Timeout) // and never will
	}
	if err := <-stopped; err != nil {
		t.Errorf("Close in Stop: %v", err)
	}
	assertReaped(t, pid)
}
