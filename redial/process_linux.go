package redial

import (
	"errors"

	"golang.org/x/sys/unix"
)

// unreaped reports whether pid, an exited child of ours, is still a
// zombie nobody has reaped, so that its process group id is still its own.
func unreaped(pid int) bool {
	for {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT|unix.WNOHANG, nil)
		if !errors.Is(err, unix.EINTR) {
			return err == nil
		}
	}
}

// waitExited blocks until the child pid has exited, without reaping it: a
// zombie keeps its pid, so its group id cannot be handed out again until
// cmd.Wait reaps it.
func waitExited(pid int) error {
	for {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}
