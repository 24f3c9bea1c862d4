//go:build unix

package command_test

import (
	"cmp"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/grpc-respawn/respawn/internal/plugintest"
	"github.com/grpc-respawn/respawn/internal/respawntest"
	"github.com/grpc-respawn/respawn/internal/testpb"
	"github.com/grpc-respawn/respawn/redial"
	"github.com/grpc-respawn/respawn/redial/command"
	"github.com/grpc-respawn/respawn/redial/internal/proc"
)

// TestCommandKeepsFilesThatAreNotSockets: a plugin that prints the path of a
// regular file, absolute or relative, gets an error, and the file and its
// directory stay. Before, Stop removed the file, and its dir if then empty,
// and a relative path named a file in the host's working directory.
func TestCommandKeepsFilesThatAreNotSockets(t *testing.T) {
	bin := plugintest.BuildOnce(t)
	work := t.TempDir()
	t.Chdir(work) // the host's working directory, where unix:relative.txt points
	abs := filepath.Join(t.TempDir(), "data", "important.db")
	if err := os.MkdirAll(filepath.Dir(abs), 0o700); err != nil {
		t.Fatal(err)
	}
	pluginDir := t.TempDir()
	for _, f := range []string{abs, filepath.Join(work, "relative.txt"), filepath.Join(pluginDir, "relative.txt")} {
		if err := os.WriteFile(f, []byte("precious"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name  string
		print string
		dir   string // Hook.Dir
		file  string // must survive
		want  string // in the error
	}{
		{"absolute URL", "unix://" + abs, "", abs, "not a unix socket"},
		{"go-plugin line", "1|1|unix|" + abs + "|grpc", "", abs, "not a unix socket"},
		{"relative, host's cwd", "unix:relative.txt", "", filepath.Join(work, "relative.txt"), "relative socket path"},
		{"relative to Dir", "unix:relative.txt", pluginDir, filepath.Join(pluginDir, "relative.txt"), "not a unix socket"},
		{"missing", "unix://" + filepath.Join(work, "nothing.sock"), "", filepath.Join(work, "relative.txt"), "no such file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := &command.Hook{Path: bin, Args: []string{"-print", tt.print}, Dir: tt.dir, Stderr: os.Stderr}
			b, err := cmd.Respawn(respawntest.Context(t, 20*time.Second), redial.Request{Generation: 1})
			if err == nil {
				_ = b.Stop()
				t.Fatalf("Respawn accepted %q", tt.print)
			}
			respawntest.WantContains(t, err, tt.want)
			respawntest.AssertReaped(t, respawntest.PIDIn(t, err))
			if data, err := os.ReadFile(tt.file); err != nil || string(data) != "precious" {
				t.Errorf("%s after the failed start: %q, %v; want it untouched", tt.file, data, err)
			}
		})
	}
}

// TestCommandKeepsSuccessorSocket: plugins that bind one fixed path (and
// unlink a stale socket first). Stopping the dead predecessor must leave the
// live successor's socket, so that it keeps serving and can be restarted.
// Before, the predecessor's Stop removed the successor's socket.
func TestCommandKeepsSuccessorSocket(t *testing.T) {
	bin := plugintest.BuildOnce(t)
	sock := filepath.Join(t.TempDir(), "fixed.sock")
	cmd := &command.Hook{Path: bin, Args: []string{"-socket", sock}, Stderr: os.Stderr}
	ctx := respawntest.Context(t, 20*time.Second)
	first, err := cmd.Respawn(ctx, redial.Request{Generation: 1})
	if err != nil {
		t.Fatalf("Respawn 1: %v", err)
	}
	if err := proc.Of(first.Process).Kill(); err != nil { // it dies, as a crash would
		t.Fatal(err)
	}
	respawntest.WaitDone(t, first.Process.Done(), "first plugin reaped")
	second, err := cmd.Respawn(ctx, redial.Request{Generation: 2})
	if err != nil {
		t.Fatalf("Respawn 2: %v", err)
	}
	t.Cleanup(func() { _ = second.Stop() })
	if err := first.Stop(); err != nil {
		t.Fatalf("Stop of the predecessor: %v", err)
	}
	if fi, err := os.Lstat(sock); err != nil || fi.Mode()&os.ModeSocket == 0 {
		t.Fatalf("successor's socket after the predecessor's Stop: %v, %v", fi, err)
	}
	respawntest.WantServedBy(t, second.Target, second.Process.PID)
	if err := second.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	// The plugin removes its own socket as its listener closes.
	if _, err := os.Lstat(sock); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the successor's own socket after its graceful Stop: %v, want it removed", err)
	}
}

// TestCommandStopRemovesOnlyItsOwnDir: Stop removes the private dir it
// made for the launch, with the socket in it, and no socket the plugin
// printed outside it, nothing reached through a symlink, and no dir put in
// the place of its own; a symlink put at its dir's name is removed itself,
// not followed (before, it was left in the socket root). Before, Stop unlinked the printed socket wherever
// it was, if it was unchanged since the handshake: a shared daemon's,
// another plugin's live one, one reached through a symlink (3 of 3).
func TestCommandStopRemovesOnlyItsOwnDir(t *testing.T) {
	bin := plugintest.BuildOnce(t)
	ctx := respawntest.Context(t, 20*time.Second)
	other, err := (&command.Hook{Path: bin, Stderr: os.Stderr}).Respawn(ctx, redial.Request{Generation: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Stop()
	otherSock := strings.TrimPrefix(other.Target, "unix://")
	privateDir := func(target string) string { // of the test plugin, which makes a dir in it
		return filepath.Dir(filepath.Dir(strings.TrimPrefix(target, "unix://")))
	}

	const daemon = "daemon.sock" // a shared daemon's socket, in a dir of its own
	sh := func(script string) []string { return []string{"-c", script, "sh"} }
	tests := []struct {
		name string
		path string                     // the binary; "" is the test plugin
		args []string                   // "{daemon}" is replaced by the daemon's dir
		kill bool                       // SIGKILL the plugin before Stop, so that it cleans up nothing
		keep []string                   // sockets that must survive Stop; "{daemon}" as in args
		gone func(target string) string // the private dir, which must be gone; nil: none to check
	}{
		{name: "a shared daemon's socket", args: []string{"-print", "unix://{daemon}/" + daemon}, keep: []string{"{daemon}/" + daemon}},
		{name: "another plugin's live socket", args: []string{"-print", other.Target}, keep: []string{otherSock}},
		{
			name: "through a symlink in the private dir", path: "/bin/sh",
			args: sh(`ln -s {daemon} "$PLUGIN_UNIX_SOCKET_DIR/link" && echo "unix://$PLUGIN_UNIX_SOCKET_DIR/link/` + daemon + `" && exec sleep 1000`),
			keep: []string{"{daemon}/" + daemon},
			gone: func(target string) string { return privateDir(target) },
		},
		{
			name: "the private dir replaced by a symlink", path: "/bin/sh",
			args: sh(`rmdir "$PLUGIN_UNIX_SOCKET_DIR" && ln -s {daemon} "$PLUGIN_UNIX_SOCKET_DIR" && echo "unix://$PLUGIN_UNIX_SOCKET_DIR/` + daemon + `" && exec sleep 1000`),
			keep: []string{"{daemon}/" + daemon},
		},
		{
			// Moved away, the dir keeps its inode: the symlink cannot reuse it.
			name: "the private dir moved away and a symlink put at its name", path: "/bin/sh",
			args: sh(`mv "$PLUGIN_UNIX_SOCKET_DIR" {daemon}/moved && ln -s {daemon} "$PLUGIN_UNIX_SOCKET_DIR" && echo "unix://$PLUGIN_UNIX_SOCKET_DIR/` + daemon + `" && exec sleep 1000`),
			keep: []string{"{daemon}/" + daemon},
			gone: func(target string) string { return filepath.Dir(strings.TrimPrefix(target, "unix://")) }, // the symlink, not its target
		},
		{name: "its own socket, in the private dir, of a killed plugin", kill: true, gone: privateDir},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			lis, err := net.Listen("unix", filepath.Join(dir, daemon))
			if err != nil {
				t.Fatal(err)
			}
			defer lis.Close()
			fill := func(ss []string) []string {
				out := make([]string, len(ss))
				for i, s := range ss {
					out[i] = strings.ReplaceAll(s, "{daemon}", dir)
				}
				return out
			}
			base, err := os.MkdirTemp("", "rs") // short: a socket path has at most 107 bytes
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = os.RemoveAll(base) })
			env := append(os.Environ(), "PLUGIN_UNIX_SOCKET_DIR="+base)
			cmd := &command.Hook{Path: cmp.Or(tt.path, bin), Args: fill(tt.args), Env: env, Stderr: os.Stderr}
			b, err := cmd.Respawn(ctx, redial.Request{Generation: 2})
			if err != nil {
				t.Fatalf("Respawn: %v", err)
			}
			if tt.kill {
				if err := syscall.Kill(b.Process.PID, syscall.SIGKILL); err != nil {
					t.Fatal(err)
				}
				respawntest.WaitDone(t, b.Process.Done(), "plugin reaped")
			}
			if err := b.Stop(); err != nil {
				t.Fatalf("Stop: %v", err)
			}
			for _, sock := range fill(tt.keep) {
				if fi, err := os.Lstat(sock); err != nil || fi.Mode()&os.ModeSocket == 0 {
					t.Errorf("%s after Stop: %v; want it kept", sock, err)
				}
			}
			if tt.gone != nil {
				if _, err := os.Lstat(tt.gone(b.Target)); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("the private dir %s after Stop: %v, want it gone", tt.gone(b.Target), err)
				}
			}
		})
	}
	respawntest.WantServedBy(t, other.Target, other.Process.PID)
}

// TestCommandRefusesRemoteTargets: without AllowRemote only unix sockets and
// loopback addresses are dialled. Before, all three were accepted and
// dialled without transport security.
func TestCommandRefusesRemoteTargets(t *testing.T) {
	bin := plugintest.BuildOnce(t)
	for _, line := range []string{"203.0.113.7:443", "1|1|tcp|203.0.113.7:443|grpc", "dns:///plugin.example.com:443", "[2001:db8::1]:443"} {
		t.Run(line, func(t *testing.T) {
			ctx := respawntest.Context(t, 20*time.Second)
			cmd := &command.Hook{Path: bin, Args: []string{"-print", line}, Stderr: os.Stderr}
			b, err := cmd.Respawn(ctx, redial.Request{Generation: 1})
			if err == nil {
				_ = b.Stop()
				t.Fatalf("Respawn accepted %q", line)
			}
			respawntest.WantContains(t, err, "not a loopback address", "AllowRemote")
			respawntest.AssertReaped(t, respawntest.PIDIn(t, err))

			cmd.AllowRemote = true
			b, err = cmd.Respawn(ctx, redial.Request{Generation: 2})
			if err != nil {
				t.Fatalf("Respawn with AllowRemote: %v", err)
			}
			defer b.Stop()
			if want := strings.TrimSuffix(strings.TrimPrefix(line, "1|1|tcp|"), "|grpc"); b.Target != want {
				t.Errorf("Target = %q, want %q", b.Target, want)
			}
		})
	}
	t.Run("loopback", func(t *testing.T) {
		cmd := &command.Hook{Path: bin, Args: []string{"-print", "127.0.0.1:7000"}, Stderr: os.Stderr}
		b, err := cmd.Respawn(respawntest.Context(t, 20*time.Second), redial.Request{Generation: 1})
		if err != nil {
			t.Fatalf("Respawn: %v", err)
		}
		defer b.Stop()
		if b.Target != "127.0.0.1:7000" {
			t.Errorf("Target = %q", b.Target)
		}
	})
}

// TestCommandBoundsTheHandshake: a first line of 8 MB without a newline is
// cut at the 64 KiB limit and quoted in at most 1 KiB. Before, the host read
// it whole (512 MB grew its heap to 518 MB) and quoted all of it.
func TestCommandBoundsTheHandshake(t *testing.T) {
	bin := plugintest.BuildOnce(t)
	for _, n := range []int{64<<10 + 1, 8 << 20} { // one byte past the 64 KiB limit, and far past
		cmd := &command.Hook{Path: bin, Args: []string{"-huge-line", itoa(n)}, Stderr: os.Stderr}
		_, err := cmd.Respawn(respawntest.Context(t, 20*time.Second), redial.Request{Generation: 1})
		respawntest.WantContains(t, err, "printed more than 65536 bytes without a newline", `xxx…"`)
		// The quote is at most 1 KiB; around it, the path, the pid and the exit.
		if len(err.Error()) > 1400 {
			t.Errorf("a %d-byte line gave an error of %d bytes, want about 1 KiB", n, len(err.Error()))
		}
		respawntest.AssertReaped(t, respawntest.PIDIn(t, err))
	}
}

// TestCommandStopIsGraceful: a live plugin is asked with SIGTERM and exits
// by itself; one that ignores SIGTERM is SIGKILLed after StopGrace. Before,
// every stop was a SIGKILL.
func TestCommandStopIsGraceful(t *testing.T) {
	bin := plugintest.BuildOnce(t)
	tests := []struct {
		name     string
		args     []string
		grace    time.Duration
		stopped  bool // SIGSTOPped before Stop, as a plugin frozen by a debugger or a cgroup freezer
		wantKill bool
	}{
		{"exits on SIGTERM", nil, 0, false, false},
		{"ignores SIGTERM", []string{"-ignore-sigterm"}, 100 * time.Millisecond, false, true},
		{"no grace", nil, -1, false, true},
		{"stopped: continued to handle SIGTERM, not left for the grace", nil, time.Hour, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := &command.Hook{Path: bin, Args: tt.args, StopGrace: tt.grace, Stderr: os.Stderr}
			b, err := cmd.Respawn(respawntest.Context(t, 20*time.Second), redial.Request{Generation: 1})
			if err != nil {
				t.Fatalf("Respawn: %v", err)
			}
			if tt.stopped {
				if err := syscall.Kill(b.Process.PID, syscall.SIGSTOP); err != nil {
					t.Fatal(err)
				}
			}
			began := time.Now()
			stopped := make(chan error, 1)
			go func() { stopped <- b.Stop() }()
			select {
			case err := <-stopped:
				if err != nil {
					t.Fatalf("Stop: %v", err)
				}
			case <-time.After(20 * time.Second):
				_ = syscall.Kill(b.Process.PID, syscall.SIGKILL)
				t.Fatalf("Stop still waiting after 20s (grace %v)", tt.grace)
			}
			e, _ := b.Process.Exit()
			t.Logf("Stop took %v: %v", time.Since(began), e)
			if killed := e.Signal != 0; killed != tt.wantKill || (!killed && e.Code != 0) {
				t.Errorf("exit = %v, want killed %v (else code 0)", e, tt.wantKill)
			}
		})
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// TestCloseWithAnOpenStreamIsGraceful: a host's open stream does not keep a
// plugin asked to stop from exiting by itself: redial closes the connection
// it dialled before it stops the plugin. Before, the plugin's graceful stop
// waited on the stream until StopGrace ran out and it was SIGKILLed (2 s).
func TestCloseWithAnOpenStreamIsGraceful(t *testing.T) {
	bin := plugintest.BuildOnce(t)
	// A grace shorter than the test plugin's own 5s drain of open streams.
	rc := respawntest.NewConn(t, &command.Hook{Path: bin, Stderr: os.Stderr, StopGrace: time.Second})
	ctx := respawntest.Context(t, 20*time.Second)
	s, err := testpb.NewTestClient(rc).Watch(ctx, &testpb.WatchRequest{Count: 1000, IntervalMs: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Recv(); err != nil {
		t.Fatal(err)
	}
	g := rc.Current()
	began := time.Now()
	if err := rc.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	e, _ := g.Process().Exit()
	t.Logf("Close with an open stream took %v: %v", time.Since(began), e)
	if e.Signal != 0 || e.Code != 0 {
		t.Errorf("exit = %v, want code 0: the plugin exits by itself", e)
	}
}
