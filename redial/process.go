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
	// Reason says whether redial stopped the process, and why; the zero
	// value, ExitCrashed, means it ended by itself or was killed from
	// outside.
	Reason ExitReason
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
// A stop redial made is named: "pid 42 killed by signal 9 (killed), retired".
func (e Exit) String() string {
	s := fmt.Sprintf("pid %d exited with code %d", e.PID, e.Code)
	if e.Signal != 0 {
		s = fmt.Sprintf("pid %d killed by signal %d (%v)", e.PID, int(e.Signal), e.Signal)
	}
	if e.Reason != ExitCrashed {
		s += ", " + e.Reason.String()
	}
	return s
}

// Process is the handle of a running plugin process, created by the
// [Respawner] that started it with [NewProcess]. It is safe for concurrent
// use. The zero value is not usable: its Done channel is nil.
type Process struct {
	pid  int
	kill func() error

	once     sync.Once
	done     chan struct{}
	exit     Exit
	reason   atomic.Int32         // ExitReason of a stop redial started
	stderr   atomic.Pointer[Tail] // the end of its stderr, if the hook keeps it
	reported atomic.Bool          // redial has emitted its exit
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

// Kill stops the process. It is how a hung plugin is put down: unless redial
// was already stopping it, its exit is reported with [ExitHung].
func (p *Process) Kill() error {
	p.MarkStopping(ExitHung)
	if p.kill == nil {
		return syscall.Kill(p.pid, syscall.SIGKILL)
	}
	return p.kill()
}

// Report records that the process has exited. Only the first report counts.
// The hook leaves e.Reason zero; redial fills in the stop it started.
func (p *Process) Report(e Exit) {
	p.once.Do(func() {
		if e.Reason == ExitCrashed {
			e.Reason = ExitReason(p.reason.Load())
		}
		p.exit = e
		close(p.done)
	})
}

// MarkStopping records why the process is about to be stopped, by redial
// or by a hook giving up on a launch ([ExitAbandoned]); the first reason
// given before the exit is the one its [Exit] reports.
func (p *Process) MarkStopping(r ExitReason) {
	p.reason.CompareAndSwap(int32(ExitCrashed), int32(r))
}

// KeepStderr makes t, which the hook feeds with the plugin's stderr, the
// tail that [Process.Stderr] and redial's launch errors quote.
func (p *Process) KeepStderr(t *Tail) { p.stderr.Store(t) }

// Stderr returns the end of the plugin's stderr, "" if the hook keeps none.
func (p *Process) Stderr() string { return p.stderr.Load().String() }
