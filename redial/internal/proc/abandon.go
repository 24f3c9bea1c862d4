package proc

import (
	"context"
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
// whose launch failed to exit by itself before it asks the kernel.
const abandonWaitExit = 100 * time.Millisecond

// Abandon is what a hook calls when it gives up on the launch of p and is
// about to stop it: unless a reason was given already
// ([Process.MarkStopping]), it waits for p's exit ([Process.Await], up to
// 100ms, then the kernel's word), and if p is not dead, records the stop
// as [Abandoned]. A plugin that failed its launch because it was dying
// (its stdout closes as it exits, but the exit is only known once it is
// reaped) is then reported as the crash it is, not as a launch redial gave
// up on. It reports whether p is dead: its exit reported, or under way.
func (p *Process) Abandon() (dead bool) {
	if p.stopping() {
		return p.Await(context.Background(), 0)
	}
	if p.Await(context.Background(), abandonWaitExit) {
		return true
	}
	p.MarkStopping(Abandoned)
	return p.Await(context.Background(), 0) // it may have exited meanwhile: then the reason is moot
}
