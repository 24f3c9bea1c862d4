package redial_test

import (
	"context"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/grpc-respawn/respawn/redial"
)

// TestProcessAwait: a process SIGKILLed is dead at once by the kernel's
// word, before anyone reaps it or reports its exit; a running one is not,
// once the bound has passed; a reported exit ends the exit signal with the
// exit as its cause.
func TestProcessAwait(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p, report := redial.NewProcess(cmd.Process.Pid, nil)
	if p.Await(ctx, 0) || p.Await(ctx, time.Millisecond) {
		t.Error("a running process is dead")
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	if !p.Await(ctx, 0) {
		t.Error("a process SIGKILLed, its exit not reported, is not dead")
	}
	_ = cmd.Wait()
	if !p.Await(ctx, 0) {
		t.Error("a process reaped, its exit not reported, is not dead")
	}
	if err := context.Cause(p.Exited()); err != nil {
		t.Errorf("exit signal ended before the report, with %v", err)
	}
	report(redial.Exit{PID: cmd.Process.Pid, Code: -1, Signal: syscall.SIGKILL})
	if e, ok := p.Exit(); !ok || e.Reason != "crashed" || !e.SelfInflicted || e.OOMKilled {
		t.Errorf("reported exit %+v, %v; want it crashed, self-inflicted (no count of OOM kills) and not OOM-killed", e, ok)
	}
	if !p.Await(ctx, time.Hour) {
		t.Error("a process whose exit is reported is not dead")
	}
	if err := context.Cause(p.Exited()); err == nil || !strings.Contains(err.Error(), "killed by signal 9") {
		t.Errorf("exit signal's cause %v, want the exit, killed by signal 9", err)
	}
	if p, _ := redial.NewProcess(0, nil); p.Await(ctx, 0) || new(redial.Process).Await(ctx, time.Millisecond) || (*redial.Process)(nil).Await(ctx, 0) {
		t.Error("a Process that names no process is dead")
	}
}
