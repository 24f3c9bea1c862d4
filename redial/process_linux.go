package redial

import (
	"errors"
	"syscall"

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

// reapGroup reaps the members of process group pgid, just killed with
// their leader, that are children of ours: a host that is a child
// subreaper (prctl PR_SET_CHILD_SUBREAPER) or PID 1 inherits the plugin's
// children when the plugin dies, and would otherwise keep them as zombies.
// It returns once no child of ours is left in the group, at once in any
// other host. The leader is reaped already; while a member, even a zombie,
// is left, the kernel does not hand out the group id again, so each wait
// takes one of the plugin's (the id is reused only once the pid counter
// has wrapped around).
func reapGroup(pgid int) {
	for {
		var ws syscall.WaitStatus
		_, err := syscall.Wait4(-pgid, &ws, 0, nil)
		if err != nil && !errors.Is(err, syscall.EINTR) {
			return // ECHILD: none left
		}
	}
}
