package goplugin_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/grpc-respawn/respawn/internal/goplugintest"
	"github.com/grpc-respawn/respawn/internal/respawntest"
	"github.com/grpc-respawn/respawn/internal/testpb"
	"github.com/grpc-respawn/respawn/redial/internal/proc"
)

// shell launches the plugin the way go-plugin's examples do, through
// "sh -c", with a shell that stays (it has more to run after the plugin),
// and a child of the plugin's group whose pid goes to childFile.
func shell(childFile string) func(bin string) *exec.Cmd {
	return func(bin string) *exec.Cmd {
		return exec.Command("sh", "-c", `sleep 600 & echo $! >"$1"; "$0"; exit $?`, bin, childFile)
	}
}

// TestShellLaunchedPluginIsStopped: a plugin behind "sh -c", frozen with
// SIGSTOP, and its child are gone after Close; killing the Process redial
// reports takes the plugin, not just the shell. Before, only the shell was
// killed, the plugin served on, and its child outlived Close.
func TestShellLaunchedPluginIsStopped(t *testing.T) {
	for _, how := range []string{"Close", "Kill"} {
		t.Run(how, func(t *testing.T) {
			childFile := filepath.Join(t.TempDir(), "child")
			h := newHost(t, setup{cmd: shell(childFile), stopGrace: 100 * time.Millisecond})
			g := h.rc.Current()
			resp, err := h.client.Get(respawntest.Context(t, 20*time.Second), &testpb.GetRequest{})
			if err != nil {
				t.Fatalf("Get: %v", err)
			}
			plugin, child := int(resp.GetPid()), respawntest.ReadPID(t, childFile)
			if plugin == g.Process().PID {
				t.Fatalf("the shell exec'd the plugin (pid %d): the test needs it to stay", plugin)
			}
			freeze(t, plugin)
			defer syscall.Kill(plugin, syscall.SIGCONT) // ours: the test's plugin
			switch how {
			case "Close":
				if err := h.rc.Close(); err != nil {
					t.Fatalf("Close: %v", err)
				}
			case "Kill":
				if err := proc.Of(g.Process()).Kill(); err != nil {
					t.Fatalf("Kill: %v", err)
				}
				waitFor(t, g.Process().Done(), "the Process reaped")
			}
			respawntest.WaitDead(t, plugin)
			respawntest.WaitDead(t, child)
		})
	}
}

// TestStopIsGraceful: a live plugin is asked to stop (go-plugin's
// Shutdown) and exits by itself; a frozen one is SIGKILLed after the grace
// period, and Close still returns. Before, every stop was a SIGKILL, and
// go-plugin logged "plugin process exited ... signal: killed".
func TestStopIsGraceful(t *testing.T) {
	t.Run("live", func(t *testing.T) {
		h := newHost(t, setup{})
		g := h.rc.Current()
		if err := h.rc.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		if e, _ := g.Process().Exit(); e.Signal != 0 || e.Code != 0 {
			t.Errorf("exit = %v, want code 0: asked to stop, not killed", e)
		}
	})
	t.Run("frozen", func(t *testing.T) {
		h := newHost(t, setup{stopGrace: 100 * time.Millisecond})
		g := h.rc.Current()
		freeze(t, g.Process().PID)
		began := time.Now()
		if err := h.rc.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		t.Logf("Close of a frozen plugin took %v", time.Since(began))
		if e, _ := g.Process().Exit(); e.Signal != syscall.SIGKILL {
			t.Errorf("exit = %v, want SIGKILL", e)
		}
	})
}

// freeze sends SIGSTOP to pid and waits until all its threads are stopped.
func freeze(t *testing.T, pid int) {
	t.Helper()
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	deadline := time.After(10 * time.Second)
	for !stopped(t, pid) {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("pid %d not stopped 10s after SIGSTOP", pid)
		}
	}
}

// stopped says whether every thread of pid is in state T (stopped).
func stopped(t *testing.T, pid int) bool {
	t.Helper()
	tasks, err := filepath.Glob("/proc/" + strconv.Itoa(pid) + "/task/*/stat")
	if err != nil || len(tasks) == 0 {
		t.Fatalf("threads of pid %d: %v", pid, err)
	}
	for _, task := range tasks {
		stat, err := os.ReadFile(task)
		if err != nil {
			return false
		}
		i := strings.LastIndexByte(string(stat), ')')
		if i < 0 || !strings.HasPrefix(string(stat[i+1:]), " T") {
			return false
		}
	}
	return true
}

func waitFor(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-respawntest.Context(t, 20*time.Second).Done():
		t.Fatalf("timed out waiting: %s", what)
	}
}

// TestSetsidGrandchildHoldsNothing: a grandchild that left the plugin's
// group with setsid, holding the plugin's stdout and stderr, does not keep
// go-plugin's readers (and its client) waiting once the plugin is dead.
// Before, the client never saw the exit until the grandchild ended.
func TestSetsidGrandchildHoldsNothing(t *testing.T) {
	file := filepath.Join(t.TempDir(), "grandchild")
	h := newHost(t, setup{cmd: func(bin string) *exec.Cmd {
		return exec.Command("sh", "-c", `setsid sleep 600 & echo $! >"$1"; echo $! >>"$1.all"; exec "$0"`, bin, file)
	}})
	g := h.rc.Current()
	grandchild := respawntest.ReadPID(t, file)
	// Every launch leaves one, the respawn after the kill too.
	t.Cleanup(func() {
		_ = h.rc.Close() // no more launches
		all, _ := os.ReadFile(file + ".all")
		for _, f := range strings.Fields(string(all)) {
			if pid, err := strconv.Atoi(f); err == nil {
				_ = syscall.Kill(pid, syscall.SIGKILL) // ours: the test's
			}
		}
	})
	c := h.hook.ClientOf(g)
	respawntest.Kill(t, g)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(10 * time.Second)
	for !c.Exited() {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatal("go-plugin's client has not seen the exit 10s after the plugin was reaped")
		}
	}
	if err := syscall.Kill(grandchild, 0); err != nil {
		t.Errorf("the setsid grandchild is gone (%v): it was not the plugin's to kill", err)
	}
}

// TestRespawnLeaksNothing: 200 times SIGKILL the plugin and call the stub
// (which respawns it); then Close. Goroutines, open fds and child processes
// are back to what they were before the first launch.
func TestRespawnLeaksNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("200 respawns")
	}
	goplugintest.BuildOnce(t) // not counted
	fds, kids := respawntest.OpenFDs(t), respawntest.Children(t)
	goroutines := goleak.IgnoreCurrent()
	h := newHost(t, setup{})
	ctx := respawntest.Context(t, 2*time.Minute)
	for i := range 200 {
		g := h.rc.Current()
		respawntest.Kill(t, g)
		resp, err := h.client.Get(ctx, &testpb.GetRequest{})
		if err != nil {
			t.Fatalf("call after kill %d: %v", i+1, err)
		}
		if resp.GetPid() == int64(g.Process().PID) {
			t.Fatalf("kill %d: answered by the killed plugin", i+1)
		}
	}
	if err := h.rc.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	goleak.VerifyNone(t, goroutines) // first: a closed fd is released once its reader returns
	if got := respawntest.Children(t); len(got) != len(kids) {
		t.Errorf("child processes after Close: %v, before: %v", got, kids)
	}
	// More is a leak; fewer, an earlier test's fd closed meanwhile (go-plugin
	// closes a dead plugin's pipes a second after it is reaped).
	if got := respawntest.OpenFDs(t); got > fds {
		t.Errorf("%d open fds after Close, %d before", got, fds)
	}
}

// TestPluginDiesWithItsHost: a go-plugin host that is SIGKILLed (no Close)
// takes its plugin with it, although go-plugin's exec.Cmd comes from the
// host's config. Before, the plugin ran on, reparented.
func TestPluginDiesWithItsHost(t *testing.T) {
	if respawntest.IsHost() {
		h := newHost(t, setup{})
		respawntest.ServeAsHost(t, h.rc.Current().Process().PID)
		return
	}
	// The killed host cannot remove its own temporary directories (its
	// t.TempDir, go-plugin's socket): they go under this test's.
	t.Setenv("TMPDIR", t.TempDir())
	respawntest.WaitDead(t, respawntest.KillHost(t, "^TestPluginDiesWithItsHost$"))
}
