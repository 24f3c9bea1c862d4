package proc

import (
	"os"
	"os/exec"
)

// ExitError is the failure of a launch, or the cause of a respawn, whose
// plugin process exited: the exit and the end of the plugin's stderr. It
// unwraps to an *exec.ExitError when the process's state is known, so that
// errors.As finds the one os/exec would have returned.
type ExitError struct {
	Exit   Exit
	Stderr string // the end of the plugin's stderr, "" if the hook kept none
	state  *os.ProcessState
}

// ExitErrorOf returns the ExitError of p, nil while p runs.
func ExitErrorOf(p *Process) *ExitError {
	e, ok := p.Exit()
	if !ok {
		return nil
	}
	return &ExitError{Exit: e, Stderr: p.Stderr(), state: p.State()}
}

// Error reads "pid 42 exited with code 3; stderr: ...".
func (e *ExitError) Error() string {
	s := e.Exit.String()
	if e.Stderr != "" {
		s += "; stderr: " + QuoteTail(e.Stderr)
	}
	return s
}

// Unwrap returns the *exec.ExitError of the process, nil if its state is
// not known.
func (e *ExitError) Unwrap() error {
	if e.state == nil {
		return nil
	}
	return &exec.ExitError{ProcessState: e.state, Stderr: []byte(e.Stderr)}
}

// exitCause is the cause of [Process.Exited]: the process's [ExitError],
// read when it is asked for, so that it quotes the stderr the hook read
// after the exit was reported (go-plugin reads the pipes to their end
// after the process is reaped).
type exitCause struct{ p *Process }

func (c exitCause) Error() string { return ExitErrorOf(c.p).Error() }
func (c exitCause) Unwrap() error { return ExitErrorOf(c.p) }
