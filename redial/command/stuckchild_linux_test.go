//go:build linux

package command_test

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/grpc-respawn/respawn/internal/respawntest"
	"github.com/grpc-respawn/respawn/redial"
)

// TestStuckChildDoesNotHoldTheExit: in a host that is a child subreaper,
// a plugin's child that cannot die (here frozen by a cgroup v1 freezer,
// where SIGKILL leaves it in D state until thawed) does not hold up the
// plugin's exit report, nor Close: its reaping goes on in the background,
// and it is reaped once it can die.
func TestStuckChildDoesNotHoldTheExit(t *testing.T) {
	if os.Getenv(subreaperPlugin) == "" {
		if os.Geteuid() != 0 {
			t.Skip("needs root for a cgroup v1 freezer")
		}
		if _, err := os.Stat("/sys/fs/cgroup/freezer/cgroup.procs"); err != nil {
			t.Skipf("no cgroup v1 freezer: %v", err)
		}
	}
	hook, childFile := subreaperHost(t)
	if hook == nil {
		return // passed in the subreaper test binary
	}
	rc := respawntest.NewConn(t, hook, redial.WithPacing(redial.Pacing{GracePeriod: time.Millisecond})) // closed after the thaw, below
	ctx := respawntest.Context(t, 30*time.Second)
	if err := rc.Connect(ctx); err != nil {
		t.Fatalf("Connect: %v", err)
	}
	child := respawntest.ReadPID(t, childFile)

	cg := filepath.Join("/sys/fs/cgroup/freezer", "respawn-stuck-"+strconv.Itoa(os.Getpid()))
	if err := os.Mkdir(cg, 0o755); err != nil {
		t.Fatalf("freezer cgroup: %v", err)
	}
	write := func(file, v string) {
		if err := os.WriteFile(filepath.Join(cg, file), []byte(v), 0o644); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
	}
	thawed := false
	thaw := func() {
		if thawed {
			return
		}
		thawed = true
		write("freezer.state", "THAWED")
		// The child dies once thawed, and the background reaper takes it.
		deadline := time.Now().Add(respawntest.Timeout)
		for {
			if _, err := os.Stat("/proc/" + strconv.Itoa(child)); errors.Is(err, os.ErrNotExist) {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("child %d not reaped %v after it was thawed", child, respawntest.Timeout)
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		_ = os.Remove(cg)
	}
	t.Cleanup(thaw)
	write("cgroup.procs", strconv.Itoa(child))
	write("freezer.state", "FROZEN")
	for deadline := time.Now().Add(respawntest.Timeout); ; time.Sleep(10 * time.Millisecond) {
		b, err := os.ReadFile(filepath.Join(cg, "freezer.state"))
		if err == nil && strings.TrimSpace(string(b)) == "FROZEN" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("child %d not frozen: %q, %v", child, b, err)
		}
	}

	g := rc.Current()
	respawntest.Kill(t, g) // fails unless the exit is reported
	if _, err := os.Stat("/proc/" + strconv.Itoa(child)); err != nil {
		t.Fatalf("the frozen child %d is gone already (%v): the test proves nothing", child, err)
	}
	closed := make(chan error, 1)
	go func() { closed <- rc.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Errorf("Close: %v", err)
		}
	case <-time.After(respawntest.Timeout):
		t.Errorf("Close did not return within %v with the child stuck", respawntest.Timeout)
		thaw()
		<-closed
	}
	thaw()
	if err := syscall.Kill(child, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("child %d: kill 0 = %v, want ESRCH", child, err)
	}
}
