package redial_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/grpc-respawn/respawn/internal/respawntest"
	"github.com/grpc-respawn/respawn/redial"
)

// TestStandbyCloseStopsEverySpare closes Conns while their spares are
// being launched, 30 times: once Close returns, no plugin of the Conn is
// left running, also none whose hook was still starting it when the Conn
// closed (a host that exits right after Close used to orphan those). Each
// Close comes once the hook has been asked for a spare: closed at once
// after Connect, the Conn would never ask for one.
func TestStandbyCloseStopsEverySpare(t *testing.T) {
	mark := filepath.Join(t.TempDir(), "journal") // in every plugin's command line
	plugin := newPluginHook(t, "-journal", mark)
	for i := range 30 {
		asked := make(chan struct{}, 1)
		h := &spareHook{pluginHook: plugin, onSpare: func() {
			select {
			case asked <- struct{}{}:
			default:
			}
		}}
		rc, err := redial.New(h.Respawner(), redial.WithPacing(redial.Pacing{Spares: 2}))
		if err != nil {
			t.Fatal(err)
		}
		if err := rc.Connect(respawntest.Context(t, 20*time.Second)); err != nil {
			t.Fatal(err)
		}
		waitDone(t, asked, "a spare's launch")
		if err := rc.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		if pids := running(t, mark); len(pids) > 0 {
			t.Fatalf("iteration %d: plugins %v still running after Close returned", i, pids)
		}
	}
}

// running returns the pids of the live processes (not zombies) whose
// command line contains arg.
func running(t *testing.T, arg string) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && bytes.Contains(cmdline, []byte(arg)) { // a zombie's is empty
			pids = append(pids, pid)
		}
	}
	return pids
}
