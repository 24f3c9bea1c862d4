package proc

import (
	"os/exec"
	"syscall"
	"testing"
)

// TestExitedUnreaped: a child that runs is not taken for one that has
// exited (Abandon would wait a second more for its reaper), a zombie is,
// and a reaped one is not.
func TestExitedUnreaped(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Skip(err)
	}
	pid := cmd.Process.Pid
	if exitedUnreaped(pid) {
		t.Errorf("exitedUnreaped(running child) = true, want false")
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := waitExited(pid); err != nil {
		t.Fatal(err)
	}
	if !exitedUnreaped(pid) {
		t.Errorf("exitedUnreaped(zombie) = false, want true")
	}
	_ = cmd.Wait()
	if exitedUnreaped(pid) {
		t.Errorf("exitedUnreaped(reaped child) = true, want false")
	}
}
