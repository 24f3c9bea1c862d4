//go:build unix

package redial_test

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grpc-respawn/respawn/internal/respawntest"
	"github.com/grpc-respawn/respawn/internal/testpb"
	"github.com/grpc-respawn/respawn/redial"
	"github.com/grpc-respawn/respawn/redial/command"
)

func TestNewNilHook(t *testing.T) {
	tests := []struct {
		name string
		hook redial.Respawner
	}{
		{"nil interface", nil},
		{"nil RespawnerFunc", respawntest.RespawnerFunc(nil)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rc, err := redial.New(tt.hook)
			if err == nil {
				_ = rc.Close()
				t.Fatal("New: got no error, want one")
			}
			if rc != nil {
				t.Errorf("New returned %v with an error, want nil", rc)
			}
		})
	}
}

// stopCounter counts the calls of a Backend's Stop.
type stopCounter struct {
	n    atomic.Int32
	done chan struct{}
}

func newStopCounter() *stopCounter { return &stopCounter{done: make(chan struct{})} }

func (s *stopCounter) Stop() error {
	if s.n.Add(1) == 1 {
		close(s.done)
	}
	return nil
}

func TestHookFails(t *testing.T) {
	errHook := errors.New("no plugin for you")
	tests := []struct {
		name      string
		backend   func(*stopCounter) (redial.Backend, error)
		wantIs    error  // matched with errors.Is, if non-nil
		wantMsg   string // in the error
		wantStops int32  // calls of the Backend's Stop
	}{
		{
			name: "error",
			backend: func(s *stopCounter) (redial.Backend, error) {
				return redial.Backend{}, errHook
			},
			wantIs: errHook,
		},
		{
			name: "error with a half-started Backend",
			backend: func(s *stopCounter) (redial.Backend, error) {
				return redial.Backend{Stop: s.Stop}, errHook
			},
			wantIs:    errHook,
			wantStops: 1,
		},
		{
			name: "neither Conn nor Target",
			backend: func(s *stopCounter) (redial.Backend, error) {
				return redial.Backend{Stop: s.Stop}, nil
			},
			wantMsg:   "neither a Conn nor a Target",
			wantStops: 1,
		},
		{
			name: "Target nobody listens on",
			backend: func(s *stopCounter) (redial.Backend, error) {
				return redial.Backend{Target: "unix:///nonexistent/redial-test.sock", Stop: s.Stop}, nil
			},
			wantMsg:   "new plugin not ready",
			wantStops: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stops := newStopCounter()
			hook := respawntest.RespawnerFunc(func(context.Context, redial.Request) (redial.Backend, error) {
				return tt.backend(stops)
			})
			rc := newConn(t, hook, redial.WithPacing(redial.Pacing{RespawnTimeout: 10 * time.Second}))
			err := rc.ConnectOnce(respawntest.Context(t, 20*time.Second))
			if err == nil {
				t.Fatal("Connect: got no error, want one")
			}
			if tt.wantIs != nil && !errors.Is(err, tt.wantIs) {
				t.Errorf("Connect: got %v, want an error matching %v", err, tt.wantIs)
			}
			if tt.wantMsg != "" {
				wantContains(t, err, tt.wantMsg)
			}
			if got := status.Code(err); got != codes.Unavailable {
				t.Errorf("code = %v, want Unavailable", got)
			}
			if rc.Current() != nil {
				t.Error("Current() is set after a failed first launch")
			}
			_ = rc.Close()
			if got := stops.n.Load(); got != tt.wantStops {
				t.Errorf("Backend.Stop called %d times, want %d", got, tt.wantStops)
			}
		})
	}
}

func TestHookPanics(t *testing.T) {
	plugin := newPluginHook(t)
	var panicked atomic.Bool
	hook := respawntest.RespawnerFunc(func(ctx context.Context, req redial.Request) (redial.Backend, error) {
		if !panicked.Swap(true) {
			panic("hook bug")
		}
		return plugin.Respawner().Respawn(ctx, req)
	})
	rc := newConn(t, hook)

	err := rc.ConnectOnce(respawntest.Context(t, 20*time.Second))
	if !errors.Is(err, redial.ErrHookPanic) {
		t.Fatalf("Connect: got %v, want ErrHookPanic", err)
	}
	wantContains(t, err, "hook bug")

	if err := rc.ConnectOnce(respawntest.Context(t, 20*time.Second)); err != nil {
		t.Fatalf("Connect after a panic: %v", err)
	}
	if _, err := testpb.NewTestClient(rc).Get(respawntest.Context(t, 10*time.Second), &testpb.GetRequest{}); err != nil {
		t.Fatalf("Get: %v", err)
	}
	if got := rc.Current().Number(); got != 1 {
		t.Errorf("generation %d, want 1", got)
	}
}

func TestHookHangs(t *testing.T) {
	t.Run("ignores ctx", func(t *testing.T) {
		stops := newStopCounter()
		release := make(chan struct{})
		returned := make(chan struct{})
		hook := respawntest.RespawnerFunc(func(context.Context, redial.Request) (redial.Backend, error) {
			defer close(returned)
			<-release
			return redial.Backend{Target: "unix:///nonexistent/redial-test.sock", Stop: stops.Stop}, nil
		})
		rc := newConn(t, hook, redial.WithPacing(redial.Pacing{RespawnTimeout: 200 * time.Millisecond}))
		err := rc.ConnectOnce(respawntest.Context(t, 20*time.Second))
		if !errors.Is(err, redial.ErrRespawnTimeout) {
			t.Fatalf("Connect: got %v, want ErrRespawnTimeout", err)
		}
		if got := status.Code(err); got != codes.Unavailable {
			t.Errorf("code = %v, want Unavailable", got)
		}
		if got := stops.n.Load(); got != 0 {
			t.Fatalf("Stop called %d times before the hook returned", got)
		}
		close(release)
		waitDone(t, returned, "hook returned")
		waitDone(t, stops.done, "the late Backend stopped")
		if err := rc.Close(); err != nil {
			t.Fatal(err)
		}
		if got := stops.n.Load(); got != 1 {
			t.Errorf("Stop called %d times, want once", got)
		}
	})
	// A hook that does return when ctx ends, with ctx's error, must be
	// reported the same way: the race between its return and the timeout
	// must not show. Several runs, since it used to be a coin toss.
	t.Run("honours ctx", func(t *testing.T) {
		for range 8 {
			hook := respawntest.RespawnerFunc(func(ctx context.Context, _ redial.Request) (redial.Backend, error) {
				<-ctx.Done()
				return redial.Backend{}, ctx.Err()
			})
			rc := newConn(t, hook, redial.WithPacing(redial.Pacing{RespawnTimeout: 20 * time.Millisecond}))
			err := rc.ConnectOnce(respawntest.Context(t, 20*time.Second))
			if !errors.Is(err, redial.ErrRespawnTimeout) {
				t.Fatalf("Connect: got %v, want ErrRespawnTimeout", err)
			}
			_ = rc.Close()
		}
	})
	// A plugin that accepts connections but never speaks gRPC keeps the
	// dial CONNECTING: the respawn times out waiting for it to be ready.
	t.Run("plugin never ready", func(t *testing.T) {
		sock := filepath.Join(t.TempDir(), "mute.sock")
		lis, err := net.Listen("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		var conns sync.WaitGroup
		accepted := make(chan net.Conn, 16)
		conns.Go(func() {
			for {
				c, err := lis.Accept()
				if err != nil {
					return
				}
				accepted <- c // held open, never answered
			}
		})
		t.Cleanup(func() {
			_ = lis.Close()
			conns.Wait()
			close(accepted)
			for c := range accepted {
				_ = c.Close()
			}
		})
		stops := newStopCounter()
		hook := respawntest.RespawnerFunc(func(context.Context, redial.Request) (redial.Backend, error) {
			return redial.Backend{Target: "unix://" + sock, Stop: stops.Stop}, nil
		})
		rc := newConn(t, hook, redial.WithPacing(redial.Pacing{RespawnTimeout: 200 * time.Millisecond}))
		err = rc.ConnectOnce(respawntest.Context(t, 20*time.Second))
		if !errors.Is(err, redial.ErrRespawnTimeout) {
			t.Fatalf("Connect: got %v, want ErrRespawnTimeout", err)
		}
		wantContains(t, err, "not ready")
		if got := stops.n.Load(); got != 1 {
			t.Errorf("Stop called %d times, want once", got)
		}
	})
	t.Run("slow plugin", func(t *testing.T) {
		cmd := &command.Hook{Path: newPluginHook(t).bin, Args: []string{"-start-delay", "5s"}}
		hookErr := make(chan error, 1)
		hook := respawntest.RespawnerFunc(func(ctx context.Context, req redial.Request) (redial.Backend, error) {
			b, err := cmd.Respawn(ctx, req)
			hookErr <- err
			return b, err
		})
		rc := newConn(t, hook, redial.WithPacing(redial.Pacing{RespawnTimeout: 200 * time.Millisecond}))
		err := rc.ConnectOnce(respawntest.Context(t, 20*time.Second))
		if !errors.Is(err, redial.ErrRespawnTimeout) {
			t.Fatalf("Connect: got %v, want ErrRespawnTimeout", err)
		}
		select {
		case err := <-hookErr:
			// Command gave up on its own because the respawn's ctx ended.
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("Command: got %v, want context.DeadlineExceeded", err)
			}
			assertReaped(t, pidIn(t, err))
		case <-time.After(20 * time.Second):
			t.Fatal("Command did not return after the respawn timed out")
		}
	})
}
