//go:build unix

package redial_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grpc-respawn/respawn/internal/respawntest"
	"github.com/grpc-respawn/respawn/internal/testpb"
	"github.com/grpc-respawn/respawn/redial"
)

func TestCloseDuringRespawn(t *testing.T) {
	entered := make(chan struct{})
	hook := redial.RespawnerFunc(func(ctx context.Context, _ redial.Request) (redial.Backend, error) {
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
	hook := redial.RespawnerFunc(func(context.Context, redial.Request) (redial.Backend, error) {
		calls.Add(1)
		return redial.Backend{}, errors.New("cannot start")
	})
	rc := newConn(t, hook,
		redial.WithBackOff(func() backoff.BackOff { return backoff.NewConstantBackOff(time.Hour) }))
	if err := rc.Connect(respawntest.Context(t, 20*time.Second)); err == nil {
		t.Fatal("Connect: got no error, want one")
	}
	rc.Respawn(nil, errors.New("try again")) // starts a respawn that backs off for an hour

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
	assertReaped(t, g.Process().PID())
	waitShutdown(t, g.ClientConn())
}
