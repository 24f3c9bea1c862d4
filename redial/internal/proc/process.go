// Package proc supervises plugin processes: it starts them in process
// groups of their own (job objects on Windows), with their stdout and
// stderr on pipes of its own, waits for their exits (on Linux with one
// goroutine per plugin, through a pidfd and epoll), reaps them with
// whatever is left of their groups, and reports each exit, with how it
// ended, through a [Process]. It reads what the kernel knows of a process
// (/proc: is it dying, its resident memory, the count of OOM kills).
//
// It knows nothing of gRPC nor of package redial, which wraps a Process in
// the handle hooks return: the exec hook and the go-plugin hook start
// their plugins here, with [Start].
package proc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/grpc-respawn/respawn/internal/procfs"
)

// Reason says whether redial stopped a process, and why.
type Reason string

// The reasons an [Exit] gives.
const (
	// Crashed: nobody in this host asked the process to end: it exited or
	// something outside killed it. Only these exits are crashes.
	Crashed Reason = "crashed"
	// Retired: redial stopped it after a newer plugin replaced it.
	Retired Reason = "retired"
	// Hung: it was killed because it hung (the health probe's verdict).
	Hung Reason = "hung-killed"
	// Abandoned: it was stopped because its launch failed or timed out
	// before it was ready.
	Abandoned Reason = "launch-abandoned"
	// Closed: the Conn's Close stopped it.
	Closed Reason = "closed"
)

// Exit says how a plugin process ended. Its fields are those of
// redial.Exit, which converts from it.
type Exit struct {
	PID           int
	Code          int            // -1 if killed by a signal
	Signal        syscall.Signal // 0 if it exited by itself
	Reason        Reason         // one of the reasons above
	OOMKilled     bool           // a SIGKILL while the kernel counted an OOM kill
	SelfInflicted bool           // the plugin's own work may have ended it
}

// evidence is what the kernel's count of OOM kills says about a SIGKILL.
type evidence int8

const (
	oomUnknown evidence = iota // no count was read: it may be an OOM kill
	oomNone                    // the count did not move while the plugin ran
	oomCounted                 // it moved: the kill may be the OOM killer's
)

// selfInflicted says whether the plugin's own work may have ended it: it
// exited by itself (a Go panic exits 2, as does the runtime when memory
// runs out), crashed on a signal raised by its own fault (SIGSEGV, SIGBUS,
// SIGABRT, SIGILL, SIGFPE, ...), was killed by the kernel's OOM killer
// (a SIGKILL the count of OOM kills does not rule out), or hung and was
// killed by redial. Not for the other stops redial makes, nor for SIGTERM,
// SIGINT and SIGHUP, which only another process sends.
func selfInflicted(reason Reason, sig syscall.Signal, oom evidence) bool {
	switch reason {
	case Crashed:
	case Hung:
		return true
	default:
		return false
	}
	switch sig {
	case syscall.SIGKILL:
		return oom != oomNone
	case syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP:
		return false
	}
	return true
}

// exitOf converts the state reported by [os/exec.Cmd.Wait].
func exitOf(pid int, ps *os.ProcessState) Exit {
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
// A stop redial made is named: "pid 42 killed by signal 9 (killed), retired";
// so is an OOM kill: "pid 42 killed by signal 9 (killed), oom-killed".
func (e Exit) String() string {
	s := fmt.Sprintf("pid %d exited with code %d", e.PID, e.Code)
	if e.Signal != 0 {
		s = fmt.Sprintf("pid %d killed by signal %d (%v)", e.PID, int(e.Signal), e.Signal)
	}
	if e.OOMKilled {
		s += ", oom-killed"
	}
	if e.Reason != Crashed && e.Reason != "" {
		s += ", " + string(e.Reason)
	}
	return s
}

// Process is a running plugin process: its pid, how to kill it, and its
// exit once reported. It is safe for concurrent use.
type Process struct {
	pid  int
	kill func() error
	term func() error // asks the process to stop; nil if it cannot be asked

	once sync.Once
	// exited is the exit signal: it ends once, when the exit is reported,
	// with the exit as its cause. Everything that waits for the exit waits
	// on it, or with [Process.Await].
	exited     context.Context
	markExited context.CancelCauseFunc
	// ended is set in the same report, just before exited ends: the
	// signal read in one atomic load, for the checks every call makes.
	ended  atomic.Bool
	exit   Exit
	state  *os.ProcessState       // as cmd.Wait left it, nil if not known
	reason atomic.Pointer[Reason] // the reason of a stop redial started
	stderr atomic.Pointer[Tail]   // the end of its stderr, if the hook keeps it
	// status is the process's status file, held open from the start of a
	// process this package started until its exit is reported; nil for
	// the others, whose status Await reads by pid.
	status *procfs.Status
}

// New returns the process pid. kill must stop the process (and its
// children) and may be called more than once; the exit is reported with
// [Process.Report] once the process is reaped. A nil kill makes
// [Process.Kill] SIGKILL pid alone, and only while no exit has been
// reported.
func New(pid int, kill func() error) *Process {
	p := &Process{pid: pid, kill: kill}
	p.exited, p.markExited = context.WithCancelCause(context.Background())
	return p
}

// PID returns the process id.
func (p *Process) PID() int { return p.pid }

// Exited returns the exit signal: a context that ends when the exit is
// reported, whose cause ([context.Cause]) is the exit, an [*ExitError]
// once unwrapped (see [ExitErrorOf]). Its Done channel is the one to
// select on, [context.AfterFunc] runs a func at the exit with no goroutine
// waiting meanwhile, and [Process.Await] bounds a wait for it.
func (p *Process) Exited() context.Context { return p.exited }

// Done returns the channel of [Process.Exited].
func (p *Process) Done() <-chan struct{} { return p.exited.Done() }

// Ended reports whether the exit has been reported: the exit signal in one
// atomic load. A nil Process never ends.
func (p *Process) Ended() bool { return p != nil && p.ended.Load() }

// Exit returns how the process ended, and false while it still runs.
func (p *Process) Exit() (Exit, bool) {
	if !p.ended.Load() {
		return Exit{}, false
	}
	return p.exit, true
}

// State returns what cmd.Wait left of the process, nil while it runs or
// if its exit was reported without it.
func (p *Process) State() *os.ProcessState {
	if !p.ended.Load() {
		return nil
	}
	return p.state
}

// errNoProcess is Kill's error for a Process that names no process.
var errNoProcess = errors.New("redial: Process has no kill func and no valid pid")

// Kill stops the process. It is how a hung plugin is put down: unless a
// stop was already under way, its exit is reported with [Hung]. Without a
// kill func it SIGKILLs (on Windows: terminates) the pid alone, unless an
// exit has already been reported; a pid of 0 or less is then an error,
// never a signal to a process group or to every process.
func (p *Process) Kill() error {
	p.MarkStopping(Hung)
	return p.Stop()
}

// Stop kills the process as Kill does, without taking it for hung: the
// stop's reason is the one marked, if any.
func (p *Process) Stop() error {
	if p.kill != nil {
		return p.kill()
	}
	if p.pid <= 0 {
		return fmt.Errorf("%w (pid %d)", errNoProcess, p.pid)
	}
	if _, exited := p.Exit(); exited {
		return nil
	}
	return killPID(p.pid)
}

// Terminate asks the process to stop: SIGTERM, then SIGCONT, to its group,
// as systemd does (a stopped plugin handles SIGTERM only once continued).
// asked is false, and nothing is sent, where the process cannot be asked:
// on Windows, which has no SIGTERM for a windowless process, and for a
// process this package did not start.
func (p *Process) Terminate() (asked bool, err error) {
	if p.term == nil {
		return false, nil
	}
	return true, p.term()
}

// Report records that the process has exited. Only the first report
// counts. e's Reason, SelfInflicted and OOMKilled are filled in here:
// the reason is the stop marked with MarkStopping, if any.
func (p *Process) Report(e Exit) { p.report(e, nil, oomUnknown) }

func (p *Process) report(e Exit, ps *os.ProcessState, oom evidence) {
	p.once.Do(func() {
		e.Reason = Crashed
		if r := p.reason.Load(); r != nil {
			e.Reason = *r
		}
		e.OOMKilled = e.Signal == syscall.SIGKILL && oom == oomCounted
		e.SelfInflicted = selfInflicted(e.Reason, e.Signal, oom)
		p.exit, p.state = e, ps
		p.ended.Store(true) // before the close: Await reads ended after a failed read
		if p.status != nil {
			p.status.Close()
		}
		p.markExited(exitCause{p})
	})
}

// MarkStopping records why the process is about to be stopped, by redial
// or by a hook giving up on a launch ([Abandoned]); the first reason given
// before the exit is the one its [Exit] reports.
func (p *Process) MarkStopping(reason Reason) {
	p.reason.CompareAndSwap(nil, &reason)
}

// stopping reports whether a stop reason has been marked.
func (p *Process) stopping() bool { return p.reason.Load() != nil }

// KeepStderr makes t, which the hook feeds with the plugin's stderr, the
// tail that [Process.Stderr] and launch errors quote.
func (p *Process) KeepStderr(t *Tail) { p.stderr.Store(t) }

// Stderr returns the end of the plugin's stderr, "" if the hook keeps none.
func (p *Process) Stderr() string { return p.stderr.Load().String() }

// Public returns the handle of p that a hook puts in its Backend: a
// *redial.Process. Package redial, which imports this one, sets it.
var Public func(p *Process) any

// Of returns the Process behind h, a *redial.Process, nil for none: what
// redial keeps unexported of it (Kill, Stderr) for the hooks' tests.
// Package redial sets it.
var Of func(h any) *Process
