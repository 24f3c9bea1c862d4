package health_test

import (
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// cldStopped is CLD_STOPPED from <signal.h>: the child was stopped.
const cldStopped = 5

// stop sends SIGSTOP to pid and waits until the process has actually
// stopped: kill(2) returns before that, and a call made in between may still
// be answered. waitid with WNOWAIT observes the stop, or an exit, without
// consuming it, so the hook's own reaper still sees the exit.
//
// waitid cannot be cancelled, so the goroutine that calls it is always
// waited for: if the process has not stopped within the limit, it is
// SIGKILLed, which makes waitid return (with the exit) before stop fails tb.
func stop(tb testing.TB, pid int) {
	tb.Helper()
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		tb.Fatal(err)
	}
	type result struct {
		code int32
		err  error
	}
	done := make(chan result, 1)
	go func() {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WSTOPPED|unix.WEXITED|unix.WNOWAIT, nil)
		done <- result{info.Code, err}
	}()
	const limit = 10 * time.Second
	var r result
	select {
	case r = <-done:
	case <-time.After(limit):
		// waitid has not returned, so the child has neither stopped
		// nor exited: it is unreaped and the pid still names it.
		_ = syscall.Kill(pid, syscall.SIGKILL)
		<-done
		tb.Fatalf("pid %d did not stop within %v; killed it", pid, limit)
	}
	if r.err != nil || r.code != cldStopped {
		tb.Fatalf("waitid(%d): code %d, %v; want the process stopped", pid, r.code, r.err)
	}
}
