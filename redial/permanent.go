package redial

import (
	"errors"
	"fmt"
	"io/fs"
	"os/exec"
	"syscall"
	"time"

	"github.com/grpc-respawn/respawn/internal/gopluginnotice"
)

// ExecFailed returns err, the failure to start a plugin binary, marked
// [Permanent] when the system said the binary cannot run at all: missing,
// not executable, not an executable format. A failed fork (EAGAIN, ENOMEM)
// may pass and is returned as it is. Hooks other than [Command] use it.
func ExecFailed(err error) error {
	switch {
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, fs.ErrPermission),
		errors.Is(err, syscall.ENOEXEC), errors.Is(err, syscall.ENOTDIR),
		errors.Is(err, exec.ErrNotFound), errors.Is(err, exec.ErrDot):
		return Permanent(err)
	}
	return err
}

// notAPlugin marks err, the failure of a plugin that exited with e before
// it was ready, permanent if what the process left says it can never
// start: go-plugin's own notice that the magic cookie is missing or wrong.
func notAPlugin(e Exit, stderr string, err error) error {
	if e.Signal == 0 && e.Code == 1 && gopluginnotice.In(stderr) {
		return Permanent(err)
	}
	return err
}

// startError is a plugin [Command] started and then gave up on: what went
// wrong, and how the process ended (after the kill, if it had not exited).
type startError struct {
	path string
	err  error
	exit *ExitError
}

// Error reads "redial: plugin /bin/p (pid 42): exited before printing its
// address: pid 42 exited with code 3; stderr: ...".
func (e *startError) Error() string {
	return fmt.Sprintf("redial: plugin %s (pid %d): %v: %v", e.path, e.exit.Exit.PID, e.err, e.exit)
}

// Unwrap returns what went wrong and the *ExitError.
func (e *startError) Unwrap() []error { return []error{e.err, e.exit} }

// abandonWaitExit bounds how long [Process.Abandon] waits for a plugin
// whose launch failed to be reaped before it takes it for alive.
const abandonWaitExit = 100 * time.Millisecond

// Abandon is what a [Respawner] calls when it gives up on the launch of p
// and is about to stop it: unless a reason was given already
// ([Process.MarkStopping]), it waits up to 100ms for p to exit by itself
// (on Linux, up to a second more for the reaper of a p that has exited),
// and if p does not, records the stop as [ExitAbandoned]. A plugin that
// failed its launch because it was dying (its stdout closes as it exits,
// but the exit is only known once it is reaped) is then reported as the
// crash it is, not as a launch redial gave up on. It reports whether p has
// exited.
func (p *Process) Abandon() (exited bool) {
	if ExitReason(p.reason.Load()) != ExitCrashed {
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
	p.MarkStopping(ExitAbandoned)
	_, exited = p.Exit() // it may have exited meanwhile: then the reason is moot
	return exited
}

// abandonWaitReap bounds how long [Process.Abandon] waits for the reaper
// of a plugin known to have exited.
const abandonWaitReap = time.Second
