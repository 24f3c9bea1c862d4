package command

import (
	"fmt"

	"github.com/grpc-respawn/respawn/internal/gopluginnotice"
	"github.com/grpc-respawn/respawn/redial"
	"github.com/grpc-respawn/respawn/redial/internal/proc"
)

// execFailed returns err, the failure to start a plugin binary, marked
// [redial.Permanent] when the system said the binary cannot run at all:
// missing, not executable, not an executable format. A failed fork
// (EAGAIN, ENOMEM) may pass and is returned as it is.
func execFailed(err error) error {
	if proc.CannotRun(err) {
		return redial.Permanent(err)
	}
	return err
}

// notAPlugin marks err, the failure of a plugin that exited with e before
// it was ready, permanent if what the process left says it can never
// start: go-plugin's own notice that the magic cookie is missing or wrong.
func notAPlugin(e proc.Exit, stderr string, err error) error {
	if e.Signal == 0 && e.Code == 1 && gopluginnotice.In(stderr) {
		return redial.Permanent(err)
	}
	return err
}

// startError is a plugin the Hook started and then gave up on: what went
// wrong, and how the process ended (after the kill, if it had not exited).
type startError struct {
	path string
	err  error
	exit *proc.ExitError
}

// Error reads "command: plugin /bin/p (pid 42): exited before printing its
// address: pid 42 exited with code 3; stderr: ...".
func (e *startError) Error() string {
	return fmt.Sprintf("command: plugin %s (pid %d): %v: %v", e.path, e.exit.Exit.PID, e.err, e.exit)
}

// Unwrap returns what went wrong and the exit.
func (e *startError) Unwrap() []error { return []error{e.err, e.exit} }
