package redial

import (
	"syscall"
	"testing"
)

// TestSelfInflicted: which exits may be the plugin's own doing, so that a
// call in it may have killed it.
func TestSelfInflicted(t *testing.T) {
	for _, c := range []struct {
		name string
		e    Exit
		want bool
	}{
		{"exit 0", Exit{Code: 0}, true},
		{"Go panic", Exit{Code: 2}, true},
		{"os.Exit(5)", Exit{Code: 5}, true},
		{"SIGSEGV", Exit{Code: -1, Signal: syscall.SIGSEGV}, true},
		{"SIGBUS", Exit{Code: -1, Signal: syscall.SIGBUS}, true},
		{"SIGABRT", Exit{Code: -1, Signal: syscall.SIGABRT}, true},
		{"SIGILL", Exit{Code: -1, Signal: syscall.SIGILL}, true},
		{"SIGFPE", Exit{Code: -1, Signal: syscall.SIGFPE}, true},
		{"SIGKILL, OOM kill counted", Exit{Code: -1, Signal: syscall.SIGKILL, oom: oomCounted}, true},
		{"SIGKILL, no count read", Exit{Code: -1, Signal: syscall.SIGKILL}, true},
		{"SIGKILL, no OOM kill counted", Exit{Code: -1, Signal: syscall.SIGKILL, oom: oomNone}, false},
		{"SIGTERM", Exit{Code: -1, Signal: syscall.SIGTERM}, false},
		{"SIGINT", Exit{Code: -1, Signal: syscall.SIGINT}, false},
		{"SIGHUP", Exit{Code: -1, Signal: syscall.SIGHUP}, false},
		{"hung-killed", Exit{Code: -1, Signal: syscall.SIGKILL, oom: oomNone, Reason: ExitHung}, true},
		{"retired", Exit{Code: -1, Signal: syscall.SIGKILL, oom: oomNone, Reason: ExitRetired}, false},
		{"retired, exited by itself", Exit{Code: 0, Reason: ExitRetired}, false},
		{"launch-abandoned", Exit{Code: -1, Signal: syscall.SIGKILL, Reason: ExitAbandoned}, false},
		{"closed", Exit{Code: -1, Signal: syscall.SIGTERM, Reason: ExitClosed}, false},
	} {
		if got := c.e.SelfInflicted(); got != c.want {
			t.Errorf("%s (%v): SelfInflicted %v, want %v", c.name, c.e, got, c.want)
		}
	}
}
