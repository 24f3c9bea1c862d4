//go:build unix

package redial_test

import (
	"context"
	"crypto/tls"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/grpc-respawn/respawn/internal/goplugintest"
	"github.com/grpc-respawn/respawn/internal/respawntest"
	"github.com/grpc-respawn/respawn/redial"
	"github.com/grpc-respawn/respawn/redial/command"
)

// TestPermanentErrors: what can never start is not launched again: the
// caller gets a typed error at once, with what the plugin said.
func TestPermanentErrors(t *testing.T) {
	goPlugin := goplugintest.BuildOnce(t)
	dir := t.TempDir()
	noExec, badFormat := filepath.Join(dir, "noexec"), filepath.Join(dir, "badformat")
	if err := os.WriteFile(noExec, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(badFormat, []byte("\x00\x01 not a program"), 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		cmd  *command.Hook
		want []string
	}{
		{"binary missing", &command.Hook{Path: "/nonexistent/plugin"}, []string{"no such file"}},
		{"not executable", &command.Hook{Path: noExec}, []string{"permission denied"}},
		{"not a program", &command.Hook{Path: badFormat}, []string{"exec format error"}},
		{"not a plugin", &command.Hook{Path: "/bin/echo", Args: []string{"hello"}}, []string{`printed "hello"`}},
		{"net/rpc go-plugin", &command.Hook{Path: "/bin/sh", Args: []string{"-c", "echo '1|1|unix|/tmp/x.sock|netrpc'; sleep 60"}},
			[]string{"net/rpc"}},
		{"go-plugin without its magic cookie", &command.Hook{Path: goPlugin, Env: []string{}},
			[]string{"exited with code 1", "This binary is a plugin"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var calls atomic.Int32
			hook := respawntest.RespawnerFunc(func(ctx context.Context, req redial.Request) (redial.Backend, error) {
				calls.Add(1)
				return tt.cmd.Respawn(ctx, req)
			})
			rc := newConn(t, hook)
			for range 3 {
				err := rc.ConnectOnce(respawntest.Context(t, 20*time.Second))
				if !errors.Is(err, redial.ErrPermanent) || errors.Is(err, redial.ErrCrashLoop) {
					t.Fatalf("got %v, want ErrPermanent", err)
				}
				if got := status.Code(err); got != codes.FailedPrecondition {
					t.Errorf("code = %v, want FailedPrecondition", got)
				}
				wantContains(t, err, tt.want...)
			}
			if got := calls.Load(); got != 1 {
				t.Errorf("hook calls = %d, want 1", got)
			}
		})
	}
}

// TestSilentExitIsAFailedLaunch: a binary that exits before it prints
// anything (/bin/false) says nothing about what it is: a plugin that
// crashes at start, or cannot start yet, does the same. It is an ordinary
// failed launch (Unavailable, with its exit), launched again, not a
// permanent failure.
func TestSilentExitIsAFailedLaunch(t *testing.T) {
	var calls atomic.Int32
	hook := respawntest.RespawnerFunc(func(ctx context.Context, req redial.Request) (redial.Backend, error) {
		calls.Add(1)
		return (&command.Hook{Path: "/bin/false"}).Respawn(ctx, req)
	})
	rc := newConn(t, hook)
	for i := range 2 {
		err := rc.ConnectOnce(respawntest.Context(t, 20*time.Second))
		if errors.Is(err, redial.ErrPermanent) || status.Code(err) != codes.Unavailable {
			t.Fatalf("launch %d: %v (code %v), want an ordinary failed launch, Unavailable", i+1, err, status.Code(err))
		}
		wantContains(t, err, "exited with code 1")
	}
	if got := calls.Load(); got != 2 {
		t.Errorf("hook calls = %d, want 2", got)
	}
}

// TestErrorsCarryTheCause: a failed launch says how the plugin ended and
// what it printed, or what the transport said; never just the state of the
// connection.
func TestErrorsCarryTheCause(t *testing.T) {
	tests := []struct {
		name string
		args []string
		opts []redial.Option
		want []string
	}{
		{"exits after printing its address", []string{"-exit-after-start"}, nil, []string{"exited with code 4"}},
		{"exits at start", []string{"-exit-code", "3"}, nil, []string{"exited with code 3", "exiting with code 3 as asked"}},
		{"TLS against a plaintext plugin",
			nil,
			[]redial.Option{redial.WithDialOptions(grpcTLS())},
			[]string{"not ready", "TRANSIENT_FAILURE:", "handshake"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rc := newConn(t, newPluginHook(t, tt.args...).Respawner(), tt.opts...)
			err := rc.ConnectOnce(respawntest.Context(t, 20*time.Second))
			wantContains(t, err, tt.want...)
			if got := status.Code(err); got != codes.Unavailable {
				t.Errorf("code = %v, want Unavailable", got)
			}
		})
	}
}

func grpcTLS() grpc.DialOption {
	return grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{ServerName: "plugin", MinVersion: tls.VersionTLS12}))
}

// TestCrashLoopTextIsTrue: plugins that come up and die without serving are
// not "failed respawns".
func TestCrashLoopTextIsTrue(t *testing.T) {
	plugin := newPluginHook(t)
	rc := newConn(t, plugin.Respawner(), redial.WithPacing(redial.Pacing{CrashLoopLaunches: 2, CrashLoopWindow: time.Hour, CrashLoopCoolDown: time.Hour}))
	if err := rc.ConnectOnce(respawntest.Context(t, 20*time.Second)); err != nil {
		t.Fatal(err)
	}
	g := rc.Current()
	respawntest.Kill(t, g)
	g, err := redial.HandleOf(rc).Replace(respawntest.Context(t, 20*time.Second), g, errors.New("killed"))
	if err != nil {
		t.Fatal(err)
	}
	respawntest.Kill(t, g)
	_, err = redial.HandleOf(rc).Replace(respawntest.Context(t, 20*time.Second), g, errors.New("plugin 2 killed"))
	var cle *redial.CrashLoopError
	if !errors.As(err, &cle) || cle.Failed != 0 {
		t.Fatalf("got %v, want a *CrashLoopError with no failed launch", err)
	}
	wantContains(t, err, "2 launches in a row served no call", "plugin 2 killed")
	if strings.Contains(err.Error(), "failed") {
		t.Errorf("%q says launches failed; they came up", err)
	}
}

// TestObserversCannotHurt: a handler that panics is recovered and counted;
// one that blocks delays neither respawns nor Close.
func TestObserversCannotHurt(t *testing.T) {
	t.Run("panics", func(t *testing.T) {
		plugin := newPluginHook(t)
		closed := make(chan struct{})
		rc, g1 := connected(t, plugin, redial.WithEventHandler(func(e redial.Event) {
			if e.Kind == redial.EventClosed {
				close(closed) // the last: the panics on the others are counted
			}
			panic("observer bug on " + string(e.Kind))
		}))
		respawntest.Kill(t, g1)
		if _, err := redial.HandleOf(rc).Replace(respawntest.Context(t, 20*time.Second), g1, errors.New("killed")); err != nil {
			t.Fatal(err)
		}
		_ = rc.Close()
		waitDone(t, closed, "EventClosed")
		s := rc.Stats()
		if s.HandlerPanics == 0 || s.Exits == 0 {
			t.Errorf("Stats() = %+v, want panics counted, exits seen", s)
		}
	})
	t.Run("blocks", func(t *testing.T) {
		release := make(chan struct{})
		var once sync.Once
		defer once.Do(func() { close(release) })
		plugin := newPluginHook(t)
		rc, g1 := connected(t, plugin, redial.WithEventHandler(func(e redial.Event) {
			if e.Kind == redial.EventRespawnStart {
				<-release
			}
		}))
		respawntest.Kill(t, g1)
		if _, err := redial.HandleOf(rc).Replace(respawntest.Context(t, 20*time.Second), g1, errors.New("killed")); err != nil {
			t.Fatalf("respawn with a blocked handler: %v", err)
		}
		closed := make(chan error, 1)
		go func() { closed <- rc.Close() }()
		select {
		case <-closed:
		case <-time.After(20 * time.Second):
			t.Fatal("Close waits for a blocked handler")
		}
		once.Do(func() { close(release) })
	})
}
