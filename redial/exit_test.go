package redial_test

import (
	"strings"
	"syscall"
	"testing"

	"github.com/grpc-respawn/respawn/redial"
)

// TestExitLogValueNamesAnOOMKill: an exit event logs oom_killed for a
// SIGKILL the kernel counted as an OOM kill, and not for another SIGKILL.
func TestExitLogValueNamesAnOOMKill(t *testing.T) {
	oom := redial.Event{Kind: redial.EventExit, Exit: redial.Exit{PID: 42, Code: -1, Signal: syscall.SIGKILL, Reason: redial.ExitCrashed, OOMKilled: true, SelfInflicted: true}}
	if s := oom.LogValue().String(); !strings.Contains(s, "oom_killed=true") {
		t.Errorf("LogValue of an OOM kill: %s", s)
	}
	oom.Exit.OOMKilled = false
	if s := oom.LogValue().String(); strings.Contains(s, "oom") {
		t.Errorf("LogValue of another SIGKILL: %s", s)
	}
}
