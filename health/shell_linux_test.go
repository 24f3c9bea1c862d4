package health_test

import (
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/grpc-respawn/respawn/health"
	"github.com/grpc-respawn/respawn/internal/respawntest"
	"github.com/grpc-respawn/respawn/internal/testpb"
	"github.com/grpc-respawn/respawn/redial"
	"github.com/grpc-respawn/respawn/redial/command"
)

// behindShell returns a hook that starts the testplugin with args through
// sh -c, as go-plugin's examples launch plugins: the shell, which waits
// for the plugin, is the process the hook reports, and the plugin is its
// child in its process group.
func behindShell(args ...string) *command.Hook {
	line := pluginPath
	for _, a := range args {
		line += " " + a
	}
	// "; exit" keeps the shell: it runs the plugin as a child, not by exec.
	return &command.Hook{Path: "/bin/sh", Args: []string{"-c", line + "; exit $?"}}
}

// servingPID returns the pid of the process that answers the host's calls,
// and fails if it is the process the hook reported: the test needs a
// shell between the two.
func servingPID(t *testing.T, h *host) int {
	t.Helper()
	ctx := respawntest.Context(t, 20*time.Second)
	resp, err := h.client.Get(ctx, &testpb.GetRequest{})
	if err != nil {
		t.Fatal(err)
	}
	pid := int(resp.GetPid())
	if pid == h.rc.Current().Process().PID {
		t.Fatalf("the plugin (pid %d) is the process the hook started: no shell in between", pid)
	}
	return pid
}

// A busy plugin behind a shell is judged by its own process, not by the
// idle shell: its unanswered checks show its CPU time, and it is not
// killed however many of them there are, up to the busy limit.
func TestBusyPluginBehindAShellIsNotKilled(t *testing.T) {
	const failures = 5
	h := newHostWith(t, behindShell("-busy-health", "2s"), nil, health.Config{
		Interval: 20 * time.Millisecond,
		Timeout:  100 * time.Millisecond,
		Failures: failures,
	})
	g := h.rc.Current()
	servingPID(t, h)
	// Twice Failures unanswered checks in a row, well below the busy
	// limit (10 × Failures).
	h.checks.Wait(t, 0, "2 × Failures unanswered checks in a row", func(c health.Check) bool {
		return c.Generation == g.Number() && c.Failures >= 2*failures
	})
	h.stop()
	if n := h.events.Count(redial.EventHung, g.Number()); n != 0 {
		t.Errorf("%d hung events for a busy plugin behind a shell, want 0", n)
	}
}

// A plugin behind a shell that is stopped (SIGSTOP), while the shell is
// not, is found hung by its own state T at a check, however many failed
// checks Config.Failures asks of a plugin that shows no sign of life.
func TestStoppedPluginBehindAShellIsHung(t *testing.T) {
	h := newHostWith(t, behindShell(), nil, health.Config{
		Interval: 20 * time.Millisecond,
		Timeout:  50 * time.Millisecond,
		Failures: 1000, // 70s of silent checks: longer than the wait below
	})
	g := h.rc.Current()
	pid := servingPID(t, h)
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGCONT) })
	hung := h.events.Wait(t, redial.EventHung, g.Number(), 1)
	if !errors.Is(hung.Err, health.ErrHung) {
		t.Errorf("hung event cause = %v, want health.ErrHung", hung.Err)
	}
	if done := h.events.Wait(t, redial.EventRespawnDone, g.Number()+1, 1); done.Err != nil {
		t.Errorf("respawn: %v", done.Err)
	}
	h.stop()
}
