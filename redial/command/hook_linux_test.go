package command_test

import (
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/grpc-respawn/respawn/internal/plugintest"
	"github.com/grpc-respawn/respawn/internal/respawntest"
	"github.com/grpc-respawn/respawn/redial"
	"github.com/grpc-respawn/respawn/redial/command"
	"github.com/grpc-respawn/respawn/redial/internal/proc"
)

// TestCommandNeverSignalsAReusedGroup: a plugin dies and is reaped; its pid
// goes to an unrelated group leader (forced with ns_last_pid); the dead
// plugin's Kill and Stop must not reach that group. Before, Stop ran
// kill(-pid, SIGKILL) on it.
func TestCommandNeverSignalsAReusedGroup(t *testing.T) {
	bin := plugintest.BuildOnce(t)
	cmd := &command.Hook{Path: bin, Stderr: os.Stderr}
	b, err := cmd.Respawn(respawntest.Context(t, 20*time.Second), redial.Request{Generation: 1})
	if err != nil {
		t.Fatalf("Respawn: %v", err)
	}
	pid := b.Process.PID
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil { // the OOM killer
		t.Fatal(err)
	}
	respawntest.WaitDone(t, b.Process.Done(), "plugin reaped")

	stranger := startWithPID(t, bin, pid)
	if err := proc.Of(b.Process).Kill(); err != nil {
		t.Errorf("Kill of the reaped plugin: %v", err)
	}
	if err := b.Stop(); err != nil {
		t.Errorf("Stop: %v", err)
	}
	// The stranger answering a call made after Stop returned proves no
	// SIGKILL reached it: a pending SIGKILL is acted on before user code.
	respawntest.WantServedBy(t, stranger.Addr, pid)
}

// startWithPID starts the test plugin in a group of its own with the given
// pid, by setting the pid namespace's last pid just before forking. Other
// processes fork too, so it tries a few times; it skips the test where
// ns_last_pid cannot be written.
func startWithPID(t *testing.T, bin string, pid int) *plugintest.Plugin {
	t.Helper()
	const lastPID = "/proc/sys/kernel/ns_last_pid"
	for range 100 {
		if err := os.WriteFile(lastPID, []byte(strconv.Itoa(pid-1)), 0); err != nil {
			t.Skipf("cannot choose the next pid: %v", err)
		}
		p, err := plugintest.Launch(bin)
		if err != nil {
			t.Fatal(err)
		}
		if p.PID == pid {
			t.Cleanup(p.Close)
			return p
		}
		p.Close()
	}
	t.Skipf("pid %d went to another process 100 times", pid)
	return nil
}

// TestCommandStopTakesItsChildren: a plugin's child in its group dies with
// it, and a grandchild that left the group with setsid (and holds stdout)
// keeps no host goroutine or descriptor once the plugin is gone. Before,
// the children survived, and the host's stdout reader waited for the
// grandchild to exit.
func TestCommandStopTakesItsChildren(t *testing.T) {
	bin := plugintest.BuildOnce(t)
	dir := t.TempDir()
	childFile, setsidFile := filepath.Join(dir, "child"), filepath.Join(dir, "setsid")
	fds := respawntest.OpenFDs(t)
	goroutines := goleak.IgnoreCurrent()

	cmd := &command.Hook{Path: bin, Args: []string{"-child", childFile, "-setsid-child", setsidFile}, Stderr: os.Stderr}
	b, err := cmd.Respawn(respawntest.Context(t, 20*time.Second), redial.Request{Generation: 1})
	if err != nil {
		t.Fatalf("Respawn: %v", err)
	}
	child, grandchild := respawntest.ReadPID(t, childFile), respawntest.ReadPID(t, setsidFile)
	t.Cleanup(func() { _ = syscall.Kill(grandchild, syscall.SIGKILL) }) // ours: it is the test's plugin's
	if err := syscall.Kill(b.Process.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	respawntest.WaitDone(t, b.Process.Done(), "plugin reaped")
	respawntest.WaitDead(t, child) // killed with its leader, before any Stop
	if err := b.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if err := syscall.Kill(grandchild, 0); err != nil {
		t.Fatalf("the setsid grandchild is gone (%v): it was not the plugin's to kill", err)
	}
	// A closed pipe's fd is released when its reader has returned: wait
	// for the goroutines to end, then count.
	goleak.VerifyNone(t, goroutines)
	if got := respawntest.OpenFDs(t); got != fds {
		t.Errorf("%d open fds after Stop, %d before", got, fds)
	}
}

// TestCommandRemovesItsSocketDir: a plugin that made its socket dir in
// PLUGIN_UNIX_SOCKET_DIR and is killed before printing its address leaves
// nothing behind. Before, its dir stayed in TMPDIR.
func TestCommandRemovesItsSocketDir(t *testing.T) {
	base := t.TempDir()
	cmd := &command.Hook{
		Path:         "/bin/sh",
		Args:         []string{"-c", `mkdir "$PLUGIN_UNIX_SOCKET_DIR/plugin" && exec sleep 600`},
		Env:          append(os.Environ(), "PLUGIN_UNIX_SOCKET_DIR="+base),
		StartTimeout: 300 * time.Millisecond,
	}
	_, err := cmd.Respawn(respawntest.Context(t, 20*time.Second), redial.Request{Generation: 1})
	respawntest.WantContains(t, err, "printed no address within")
	respawntest.AssertReaped(t, respawntest.PIDIn(t, err))
	if entries, err := os.ReadDir(base); err != nil || len(entries) != 0 {
		t.Errorf("PLUGIN_UNIX_SOCKET_DIR after the failed start: %v, %v; want it empty", entries, err)
	}
}
