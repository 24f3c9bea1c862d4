package proc

import (
	"os/exec"
	"testing"
	"time"
)

// TestAbandonWaitsForALateReaper: a plugin that has exited by itself but
// whose reaper is late (here: by twice Abandon's wait) crashed; Abandon
// must not take it for a live plugin it gives up on.
func TestAbandonWaitsForALateReaper(t *testing.T) {
	cmd := exec.Command("sh", "-c", "exit 3")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	if err := waitExited(pid); err != nil { // a zombie: exited, not reaped
		t.Fatal(err)
	}
	p := New(pid, nil)
	done := make(chan bool, 1)
	go func() { done <- p.Abandon() }()

	late := time.NewTimer(2 * abandonWaitExit) // the reaper's delay, not a wait for a state
	<-late.C
	_ = cmd.Wait()
	p.Report(exitOf(pid, cmd.ProcessState))

	if exited := <-done; !exited {
		t.Error("Abandon says the plugin has not exited")
	}
	if e, _ := p.Exit(); e.Code != 3 || e.Reason != Crashed {
		t.Errorf("exit %v (reason %v), want code 3, crashed", e, e.Reason)
	}
}
