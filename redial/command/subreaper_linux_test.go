//go:build linux

package command_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/grpc-respawn/respawn/internal/plugintest"
	"github.com/grpc-respawn/respawn/internal/respawntest"
	"github.com/grpc-respawn/respawn/redial"
	"github.com/grpc-respawn/respawn/redial/command"
)

// subreaperPlugin names the environment variable that tells a re-run of
// the test binary that it is the child subreaper host, with the test
// plugin it gives.
const subreaperPlugin = "RESPAWN_TEST_SUBREAPER_PLUGIN"

// subreaperHost runs the calling test in a host that is a child subreaper.
// In the test binary it re-runs the binary with only that test, fails t
// unless it passes there, and returns a nil hook: the caller returns. In
// the re-run it makes the process a child subreaper and returns a hook for
// the test plugin that starts a child and writes its PID to childFile.
func subreaperHost(t *testing.T) (hook *command.Hook, childFile string) {
	t.Helper()
	bin := os.Getenv(subreaperPlugin)
	if bin == "" {
		ctx := respawntest.Context(t, time.Minute)
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^"+t.Name()+"$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), subreaperPlugin+"="+plugintest.BuildOnce(t))
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "--- PASS: "+t.Name()) {
			t.Fatalf("the subreaper test binary: %v\n%s", err, out)
		}
		return nil, ""
	}
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		t.Fatalf("PR_SET_CHILD_SUBREAPER: %v", err)
	}
	childFile = filepath.Join(t.TempDir(), "child")
	return &command.Hook{Path: bin, Args: []string{"-child", childFile}, Stderr: os.Stderr}, childFile
}

// TestKilledChildrenAreReaped: in a host that is a child subreaper (or PID
// 1 of a container), a plugin's children become the host's when the
// plugin dies. redial kills them with their plugin, and reaps them too: no
// zombie is left after a crash, nor after Close. The test binary runs
// itself as the subreaper, so that no other test gets the orphans.
func TestKilledChildrenAreReaped(t *testing.T) {
	hook, childFile := subreaperHost(t)
	if hook == nil {
		return // passed in the subreaper test binary
	}
	var h redial.Handle // to replace the plugin as a policy would
	rc := respawntest.NewConn(t, hook, redial.WithPacing(redial.Pacing{GracePeriod: time.Millisecond}), respawntest.WithHandle(nil, &h))
	ctx := respawntest.Context(t, 30*time.Second)
	if err := rc.Connect(ctx); err != nil {
		t.Fatalf("Connect: %v", err)
	}
	var children []int
	for i := range 2 {
		g := rc.Current()
		children = append(children, respawntest.ReadPID(t, childFile))
		respawntest.Kill(t, g) // returns once redial has reported the exit
		if z := zombies(t); len(z) != 0 {
			t.Errorf("crash %d: zombie children %v", i+1, z)
		}
		if _, err := h.Replace(ctx, g, errors.New("killed by the test")); err != nil {
			t.Fatalf("respawn %d: %v", i+1, err)
		}
	}
	children = append(children, respawntest.ReadPID(t, childFile))
	if err := rc.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if z := zombies(t); len(z) != 0 {
		t.Errorf("after Close: zombie children %v", z)
	}
	for _, pid := range children {
		respawntest.AssertReaped(t, pid)
	}
}

// zombies lists the children of this process that have exited and are not
// reaped.
func zombies(t *testing.T) []int {
	t.Helper()
	var z []int
	for _, pid := range respawntest.Children(t) {
		stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			continue // reaped meanwhile
		}
		// The state follows the command name in parentheses.
		if i := strings.LastIndexByte(string(stat), ')'); i > 0 && strings.HasPrefix(string(stat[i+1:]), " Z") {
			z = append(z, pid)
		}
	}
	return z
}
