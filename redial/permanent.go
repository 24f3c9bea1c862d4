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

// exitWaitStdout bounds how long a plugin that closed its stdout gets to
// be reaped before redial takes it for alive and kills it.
const exitWaitStdout = 100 * time.Millisecond

// exitedOrKill waits a little for p, whose stdout just closed, to be
// reaped; if it is not, the kill that follows is redial's, and its exit is
// reported as [ExitAbandoned]. Closing stdout and exiting come together,
// but the exit is only known once the process is reaped.
func exitedOrKill(p *Process) {
	t := time.NewTimer(exitWaitStdout)
	defer t.Stop()
	select {
	case <-p.Done():
	case <-t.C:
		p.MarkStopping(ExitAbandoned)
	}
}
