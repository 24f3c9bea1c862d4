package redial_test

import (
	"os/exec"
	"syscall"
	"testing"

	"github.com/grpc-respawn/respawn/redial"
)

// TestProcessDying: a process SIGKILLed is dying at once, before anyone
// reaps it or reports its exit; a running one is not.
func TestProcessDying(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p, report := redial.NewProcess(cmd.Process.Pid, nil)
	if p.Dying() {
		t.Error("a running process is dying")
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	if !p.Dying() {
		t.Error("a process SIGKILLed, its exit not reported, is not dying")
	}
	_ = cmd.Wait()
	if !p.Dying() {
		t.Error("a process reaped, its exit not reported, is not dying")
	}
	report(redial.Exit{PID: cmd.Process.Pid, Code: -1, Signal: syscall.SIGKILL})
	if e, ok := p.Exit(); !ok || e.Reason != "crashed" || !e.SelfInflicted || e.OOMKilled {
		t.Errorf("reported exit %+v, %v; want it crashed, self-inflicted (no count of OOM kills) and not OOM-killed", e, ok)
	}
	if !p.Dying() {
		t.Error("a process whose exit is reported is not dying")
	}
	if p, _ := redial.NewProcess(0, nil); p.Dying() || new(redial.Process).Dying() {
		t.Error("a Process that names no process is dying")
	}
}
