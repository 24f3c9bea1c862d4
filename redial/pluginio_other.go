//go:build !linux

package redial

import (
	"io"
	"os/exec"
)

// startPlugin starts cmd, which must not have been started, in a process
// group (a job on Windows) of its own, with its stdout read by redial and
// its stderr going to stderr. cmd.Stdout and cmd.Stderr are set here.
func startPlugin(cmd *exec.Cmd, stderr io.Writer) (*started, error) {
	return startWithGoroutines(cmd, stderr)
}
