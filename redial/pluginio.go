package redial

import (
	"io"
	"os"
	"os/exec"
)

// started is a plugin Command has just started: its group, the read end
// of its stdout, and the first line of that stdout once it is printed.
type started struct {
	g      *group
	stdout *os.File
	lines  <-chan lineResult // the address line, once
}

// lineResult is the first line of a plugin's stdout, as readLine returns it.
type lineResult struct {
	line string
	err  error
}

// startWithGoroutines starts cmd as [startPlugin] does, with a goroutine
// for each thing to wait for: the reaper, one reading stdout and, since
// stderr is not an *os.File, the one os/exec starts to copy stderr.
func startWithGoroutines(cmd *exec.Cmd, stderr io.Writer) (*started, error) {
	cmd.Stderr = stderr
	// Our own pipe rather than StdoutPipe, so that reaping the process
	// (cmd.Wait) and draining its stdout do not wait on each other.
	stdout, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd.Stdout = w
	g, err := startGroup(cmd)
	_ = w.Close()
	if err != nil {
		_ = stdout.Close()
		return nil, err
	}
	return &started{g: g, stdout: stdout, lines: readStdout(g, stdout)}, nil
}

// readStdout reads the address line from stdout on a goroutine of its own,
// then drains stdout: a plugin must never block on a full pipe. Draining
// ends at EOF or when the plugin has exited and stdout is closed, even if
// a grandchild that left the plugin's group still holds the pipe.
func readStdout(g *group, stdout *os.File) <-chan lineResult {
	lines := make(chan lineResult, 1)
	go func() {
		line, err := readLine(stdout, MaxAddressLine)
		lines <- lineResult{line, err}
		// Only now: closed earlier, at the exit, a line still in the pipe
		// would be lost. Until the line is read, stopping the plugin closes
		// stdout.
		g.proc.afterExit(func() { _ = stdout.Close() })
		_, _ = io.Copy(io.Discard, stdout)
	}()
	return lines
}
