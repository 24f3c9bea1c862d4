package proc

import (
	"os"
	"strings"
	"testing"
)

// TestProcessKillWithoutPID: a Process without a kill func and no valid pid
// is an error. Before, New(0, nil).Kill() was kill(0, SIGKILL): the
// host's own process group, this test binary included.
func TestProcessKillWithoutPID(t *testing.T) {
	for _, pid := range []int{0, -1} {
		if err := New(pid, nil).Kill(); err == nil || !strings.Contains(err.Error(), "no valid pid") {
			t.Errorf("New(%d, nil).Kill() = %v, want an error", pid, err)
		}
	}
	// And a reported exit means nothing is signalled by pid any more.
	p := New(os.Getpid(), nil)
	p.Report(Exit{PID: os.Getpid()})
	if err := p.Kill(); err != nil {
		t.Errorf("Kill after Report: %v", err)
	}
}
