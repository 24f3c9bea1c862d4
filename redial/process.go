package redial

import (
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
)

// Exit says how a plugin process ended.
type Exit struct {
	PID int // the process id
	// Code is the exit code, or -1 if the process was killed by a signal.
	Code int
	// Signal is the signal that killed the process, 0 if it exited by itself.
	// An OOM kill shows up as syscall.SIGKILL.
	Signal syscall.Signal
}

// ExitOf converts the state reported by [os/exec.Cmd.Wait].
func ExitOf(pid int, ps *os.ProcessState) Exit {
	e := Exit{PID: pid, Code: -1}
	if ps == nil {
		return e
	}
	e.Code = ps.ExitCode()
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		e.Signal = ws.Signal()
	}
	return e
}

// String says what happened in words, "pid 42 killed by signal 9 (killed)".
func (e Exit) String() string {
	if e.Signal != 0 {
		return fmt.Sprintf("pid %d killed by signal %d (%v)", e.PID, int(e.Signal), e.Signal)
	}
	return fmt.Sprintf("pid %d exited with code %d", e.PID, e.Code)
}

// Process is the handle of a running plugin process, created by the
// [Respawner] that started it with [NewProcess]. It is safe for concurrent
// use. The zero value is not usable: its Done channel is nil.
type Process struct {
	pid  int
	kill func() error

	once   sync.Once
	exited atomic.Bool // set before done is closed; cheap to read on every call
	done   chan struct{}
	exit   Exit
}

// NewProcess returns the handle of the process pid. kill must stop the
// process (and its children) and may be called more than once; the
// Respawner reports the exit with [Process.Report] once it has reaped it.
func NewProcess(pid int, kill func() error) *Process {
	return &Process{pid: pid, kill: kill, done: make(chan struct{})}
}

// PID returns the process id.
func (p *Process) PID() int { return p.pid }

// Done returns a channel that is closed when the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Exit returns how the process ended, and false while it still runs.
func (p *Process) Exit() (Exit, bool) {
	select {
	case <-p.done:
		return p.exit, true
	default:
		return Exit{}, false
	}
}

// Kill stops the process. It is how a hung plugin is put down.
func (p *Process) Kill() error {
	if p.kill == nil {
		return syscall.Kill(p.pid, syscall.SIGKILL)
	}
	return p.kill()
}

// Report records that the process has exited. Only the first report counts.
func (p *Process) Report(e Exit) {
	p.once.Do(func() {
		p.exit = e
		p.exited.Store(true)
		close(p.done)
	})
}
