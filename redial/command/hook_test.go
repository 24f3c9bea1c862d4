//go:build unix

package command_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/grpc-respawn/respawn/internal/plugintest"
	"github.com/grpc-respawn/respawn/internal/respawntest"
	"github.com/grpc-respawn/respawn/internal/testpb"
	"github.com/grpc-respawn/respawn/redial"
	"github.com/grpc-respawn/respawn/redial/command"
)

func TestCommandFailedStart(t *testing.T) {
	bin := plugintest.BuildOnce(t)
	tests := []struct {
		name    string
		args    []string
		timeout time.Duration // Command.StartTimeout
		want    []string      // in the error
		not     []string      // not in the error
	}{
		{
			name: "exits at start",
			args: []string{"-exit-at-start"},
			want: []string{"exited before printing its address", "exited with code 3"},
		},
		{
			name: "closes its stdout and keeps running",
			args: []string{"-close-stdout"},
			want: []string{"closed its stdout without printing an address", "killed by signal 9", "launch-abandoned"},
			not:  []string{"exited before"},
		},
		{
			name: "prints garbage",
			args: []string{"-garbage"},
			want: []string{`printed "this is not an address"`},
		},
		{
			name:    "prints nothing in time",
			args:    []string{"-start-delay", "5s"},
			timeout: 200 * time.Millisecond,
			want:    []string{"printed no address within 200ms"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := &command.Hook{Path: bin, Args: tt.args, StartTimeout: tt.timeout, Stderr: os.Stderr}
			b, err := cmd.Respawn(respawntest.Context(t, 20*time.Second), redial.Request{Generation: 1})
			respawntest.WantContains(t, err, tt.want...)
			for _, s := range tt.not {
				if strings.Contains(err.Error(), s) {
					t.Errorf("error %q contains %q", err, s)
				}
			}
			if b.Conn != nil || b.Target != "" || b.Process != nil || b.Stop != nil {
				t.Errorf("Backend = %+v, want zero with an error", b)
			}
			respawntest.AssertReaped(t, respawntest.PIDIn(t, err))
		})
	}
}

func TestCommandAbandoned(t *testing.T) {
	bin := plugintest.BuildOnce(t)
	cmd := &command.Hook{Path: bin, Args: []string{"-start-delay", "5s"}}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := cmd.Respawn(ctx, redial.Request{Generation: 1})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Respawn: got %v, want context.DeadlineExceeded", err)
	}
	respawntest.AssertReaped(t, respawntest.PIDIn(t, err))
}

func TestCommandMisconfigured(t *testing.T) {
	tests := []struct {
		name string
		cmd  *command.Hook
		want string
	}{
		{"nil", nil, "no Path"},
		{"no path", &command.Hook{}, "no Path"},
		{"missing binary", &command.Hook{Path: filepath.Join(t.TempDir(), "nope")}, "start "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.cmd.Respawn(respawntest.Context(t, 10*time.Second), redial.Request{})
			respawntest.WantContains(t, err, tt.want)
		})
	}
}

func TestCommandStop(t *testing.T) {
	bin := plugintest.BuildOnce(t)
	childFile := filepath.Join(t.TempDir(), "child.pid")
	tests := []struct {
		name string
		cmd  *command.Hook
	}{
		{"plugin alone", &command.Hook{Path: bin}},
		{
			// A shell that leaves a child behind in the plugin's group, then
			// becomes the plugin. The child also holds the stdout pipe.
			name: "plugin with a child",
			cmd: &command.Hook{
				Path: "/bin/sh",
				Args: []string{"-c", `sleep 600 & echo $! >"$0"; exec "$1"`, childFile, bin},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := respawntest.Context(t, 20*time.Second)
			b, err := tt.cmd.Respawn(ctx, redial.Request{Generation: 1})
			if err != nil {
				t.Fatalf("Respawn: %v", err)
			}
			stopped := false
			t.Cleanup(func() {
				if !stopped {
					_ = b.Stop()
				}
			})
			sock, ok := strings.CutPrefix(b.Target, "unix://")
			if !ok {
				t.Fatalf("Target = %q, want unix://...", b.Target)
			}
			if b.Process == nil || b.Stop == nil || b.Conn != nil {
				t.Fatalf("Backend = %+v, want a Process and a Stop and no Conn", b)
			}
			pid := b.Process.PID

			cc, err := grpc.NewClient(b.Target, grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := testpb.NewTestClient(cc).Get(ctx, &testpb.GetRequest{})
			_ = cc.Close()
			if err != nil {
				t.Fatalf("Get: %v", err)
			}
			if got := resp.GetPid(); got != int64(pid) {
				t.Errorf("served by pid %d, want %d", got, pid)
			}

			stopped = true
			if err := b.Stop(); err != nil {
				t.Fatalf("Stop: %v", err)
			}
			select {
			case <-b.Process.Done():
			default:
				t.Fatal("Stop returned before the process was reaped")
			}
			e, _ := b.Process.Exit()
			if e.PID != pid || e.Signal != 0 || e.Code != 0 {
				t.Errorf("exit = %v, want pid %d exited with code 0: asked with SIGTERM, not killed", e, pid)
			}
			respawntest.AssertReaped(t, pid)
			for _, p := range []string{sock, filepath.Dir(sock)} {
				if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("%s: %v, want it removed", p, err)
				}
			}
			if tt.cmd.Path == "/bin/sh" {
				data, err := os.ReadFile(childFile)
				if err != nil {
					t.Fatal(err)
				}
				child, err := strconv.Atoi(strings.TrimSpace(string(data)))
				if err != nil {
					t.Fatal(err)
				}
				respawntest.WaitDead(t, child)
			}
		})
	}
}
