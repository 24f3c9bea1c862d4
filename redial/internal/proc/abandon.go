package proc

import (
	"errors"
	"io/fs"
	"os/exec"
	"syscall"
	"time"
)

// CannotRun reports whether err, the failure to start a plugin binary, says
// the binary cannot run at all: missing, not executable, not an executable
// format. A failed fork (EAGAIN, ENOMEM) may pass, and is not one. The
// hooks mark such a failure permanent.
func CannotRun(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) ||
		errors.Is(err, syscall.ENOEXEC) || errors.Is(err, syscall.ENOTDIR) ||
		errors.Is(err, exec.ErrNotFound) || errors.Is(err, exec.ErrDot)
}

// abandonWaitExit bounds how long [Process.Abandon] waits for a plugin
// whose launch failed to be reaped before it takes it for alive.
const abandonWaitExit = 100 * time.Millisecond

// Abandon is what a hook calls when it gives up on the launch of p and is
// about to stop it: unless a reason was given already
// ([Process.MarkStopping]), it waits up to 100ms for p to exit by itself
// (on Linux, up to a second more for the reaper of a p that has exited),
// and if p does not, records the stop as [Abandoned]. A plugin that
// failed its launch because it was dying (its stdout closes as it exits,
// but the exit is only known once it is reaped) is then reported as the
// crash it is, not as a launch redial gave up on. It reports whether p has
// exited.
func (p *Process) Abandon() (exited bool) {
	if p.stopping() {
		_, exited = p.Exit()
		return exited
	}
	t := time.NewTimer(abandonWaitExit)
	defer t.Stop()
	select {
	case <-p.Done():
		return true
	case <-t.C:
	}
	if p.pid > 0 && exitedUnreaped(p.pid) {
		// Dead by itself, and its reaper is late (a loaded machine): it
		// crashed. Where the system cannot tell, exitedUnreaped is false.
		t.Reset(abandonWaitReap)
		select {
		case <-p.Done():
			return true
		case <-t.C:
		}
	}
	p.MarkStopping(Abandoned)
	_, exited = p.Exit() // it may have exited meanwhile: then the reason is moot
	return exited
}

// abandonWaitReap bounds how long [Process.Abandon] waits for the reaper
// of a plugin known to have exited.
const abandonWaitReap = time.Second
