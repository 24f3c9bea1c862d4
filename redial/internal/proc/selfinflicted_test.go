package proc

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
		oom  evidence
		want bool
	}{
		{"exit 0", Exit{Code: 0}, oomUnknown, true},
		{"Go panic", Exit{Code: 2}, oomUnknown, true},
		{"os.Exit(5)", Exit{Code: 5}, oomUnknown, true},
		{"SIGSEGV", Exit{Code: -1, Signal: syscall.SIGSEGV}, oomUnknown, true},
		{"SIGBUS", Exit{Code: -1, Signal: syscall.SIGBUS}, oomUnknown, true},
		{"SIGABRT", Exit{Code: -1, Signal: syscall.SIGABRT}, oomUnknown, true},
		{"SIGILL", Exit{Code: -1, Signal: syscall.SIGILL}, oomUnknown, true},
		{"SIGFPE", Exit{Code: -1, Signal: syscall.SIGFPE}, oomUnknown, true},
		{"SIGKILL, OOM kill counted", Exit{Code: -1, Signal: syscall.SIGKILL}, oomCounted, true},
		{"SIGKILL, no count read", Exit{Code: -1, Signal: syscall.SIGKILL}, oomUnknown, true},
		{"SIGKILL, no OOM kill counted", Exit{Code: -1, Signal: syscall.SIGKILL}, oomNone, false},
		{"SIGTERM", Exit{Code: -1, Signal: syscall.SIGTERM}, oomUnknown, false},
		{"SIGINT", Exit{Code: -1, Signal: syscall.SIGINT}, oomUnknown, false},
		{"SIGHUP", Exit{Code: -1, Signal: syscall.SIGHUP}, oomUnknown, false},
		{"hung-killed", Exit{Code: -1, Signal: syscall.SIGKILL, Reason: Hung}, oomNone, true},
		{"retired", Exit{Code: -1, Signal: syscall.SIGKILL, Reason: Retired}, oomNone, false},
		{"retired, exited by itself", Exit{Code: 0, Reason: Retired}, oomUnknown, false},
		{"launch-abandoned", Exit{Code: -1, Signal: syscall.SIGKILL, Reason: Abandoned}, oomUnknown, false},
		{"closed", Exit{Code: -1, Signal: syscall.SIGTERM, Reason: Closed}, oomUnknown, false},
	} {
		reason := c.e.Reason
		if reason == "" {
			reason = Crashed
		}
		if got := selfInflicted(reason, c.e.Signal, c.oom); got != c.want {
			t.Errorf("%s (%v): SelfInflicted %v, want %v", c.name, c.e, got, c.want)
		}
	}
}
