package redial

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/grpc-respawn/respawn/internal/procfs"
)

// Exit says how a plugin process ended.
type Exit struct {
	PID int // the process id
	// Code is the exit code, or -1 if the process was killed by a signal.
	Code int
	// Signal is the signal that killed the process, 0 if it exited by itself.
	// An OOM kill shows up as syscall.SIGKILL; [Exit.SelfInflicted] tells
	// it from another, on Linux.
	Signal syscall.Signal
	// Reason says whether redial stopped the process, and why; the zero
	// value, ExitCrashed, means it ended by itself or was killed from
	// outside.
	Reason ExitReason

	// oom is the kernel's word on a SIGKILL: did it count an OOM kill while
	// the plugin ran. Only StartGroup's reaper sets it.
	oom oomEvidence
}

// oomEvidence is what the kernel's count of OOM kills says about a SIGKILL.
type oomEvidence int8

const (
	oomUnknown oomEvidence = iota // no count was read: it may be an OOM kill
	oomNone                       // the count did not move while the plugin ran
	oomCounted                    // it moved: the kill may be the OOM killer's
)

// oomKilled reports whether e is a SIGKILL while the kernel counted an OOM
// kill.
func (e Exit) oomKilled() bool { return e.Signal == syscall.SIGKILL && e.oom == oomCounted }

// SelfInflicted reports whether the plugin's own work may have ended it,
// so that a call in it when it died may be what killed it: it exited by
// itself (a Go panic exits 2, as does the runtime when memory runs out),
// crashed on a signal raised by its own fault (SIGSEGV, SIGBUS, SIGABRT,
// SIGILL, SIGFPE, ...), was killed by the kernel's OOM killer, or hung and
// was killed by redial ([ExitHung]).
//
// It is false for the other stops redial makes (retired, launch-abandoned,
// closed), for SIGTERM, SIGINT and SIGHUP, which only another process
// sends, and for a SIGKILL the OOM killer did not send. On Linux a
// process started by [StartGroup] tells an OOM kill from any other
// SIGKILL by the kernel's count of OOM kills (its memory cgroup's oom_kill
// in memory.events, or in memory.oom_control under cgroup v1; the host's
// in /proc/vmstat where the cgroup's cannot be read), read as it starts
// and when it is reaped: any OOM kill counted meanwhile makes the SIGKILL
// one. A plugin that moves itself to another memory cgroup is judged by
// the count of the one it started in. Elsewhere, and for an Exit a hook
// made itself with [ExitOf], every SIGKILL may be an OOM kill.
func (e Exit) SelfInflicted() bool {
	switch e.Reason {
	case ExitCrashed:
	case ExitHung:
		return true
	default:
		return false
	}
	switch e.Signal {
	case syscall.SIGKILL:
		return e.oom != oomNone
	case syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP:
		return false
	}
	return true
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
// A stop redial made is named: "pid 42 killed by signal 9 (killed), retired";
// so is a SIGKILL while the kernel counted an OOM kill (see
// [Exit.SelfInflicted]): "pid 42 killed by signal 9 (killed), oom-killed".
func (e Exit) String() string {
	s := fmt.Sprintf("pid %d exited with code %d", e.PID, e.Code)
	if e.Signal != 0 {
		s = fmt.Sprintf("pid %d killed by signal %d (%v)", e.PID, int(e.Signal), e.Signal)
	}
	if e.oomKilled() {
		s += ", oom-killed"
	}
	if e.Reason != ExitCrashed {
		s += ", " + e.Reason.String()
	}
	return s
}

// Process is the handle of a running plugin process, created by the
// [Respawner] that started it with [NewProcess] or [StartGroup]. It is safe
// for concurrent use. The zero value is not usable: its Done channel is nil.
type Process struct {
	pid  int
	kill func() error

	once   sync.Once
	exited atomic.Bool // set before gone ends; cheap to read on every call
	// gone ends when the exit is reported: its Done is Done's channel, and
	// afterExit hangs its funcs on it. nil in a zero Process.
	gone     context.Context
	markGone context.CancelFunc
	exit     Exit
	reason   atomic.Int32         // ExitReason of a stop redial started
	stderr   atomic.Pointer[Tail] // the end of its stderr, if the hook keeps it
	reported atomic.Bool          // redial has emitted its exit
}

// NewProcess returns the handle of the process pid. kill must stop the
// process (and its children) and may be called more than once; the
// Respawner reports the exit with [Process.Report] once it has reaped it.
//
// A nil kill makes [Process.Kill] signal pid alone, and only while no exit
// has been reported; see there.
func NewProcess(pid int, kill func() error) *Process {
	p := &Process{pid: pid, kill: kill}
	p.gone, p.markGone = context.WithCancel(context.Background())
	return p
}

// afterExit arranges for f to run on a goroutine of its own once the
// process has exited (at once if it has): no goroutine waits for the exit
// meanwhile. stop cancels f and reports whether it did, as
// [context.AfterFunc]'s stop.
// A zero Process, which has no exit to wait for, never runs f.
func (p *Process) afterExit(f func()) (stop func() bool) {
	if p.gone == nil {
		return func() bool { return true }
	}
	return context.AfterFunc(p.gone, f)
}

// StartGroup starts cmd, which must not have been started, and returns its
// Process. This is what [Command] and the go-plugin hook use; a Respawner
// that execs plugins itself can use it too.
//
// On Unix the plugin leads a process group of its own (cmd.SysProcAttr gets
// Setpgid unless it asks for Setsid, which has the same effect). The
// Process's Kill SIGKILLs the whole group, and does so only while the
// leader is known not to be reaped, so that the group id cannot belong to
// anyone else yet; after that Kill does nothing. On Linux "known not to be
// reaped" is exact (waitid with WNOWAIT): when the leader exits, whatever
// is left of its group is killed while the leader is a zombie, then the
// leader is reaped and its exit reported, so the plugin's children never
// outlive it; those the host has inherited (a host that is PID 1 or a child
// subreaper) are reaped before the exit is reported (one that cannot die
// yet, held in D state or by a freezer, delays the report by at most 1s
// and is reaped once it dies). On other Unix systems the reaper reaps first and the group is
// signalled until just before, a window of a few instructions for the pid
// to be reused; children of a plugin that exits by itself are left alone
// there. A child that made itself a session of its own (setsid) is no
// longer the plugin's and is never signalled.
//
// On Windows the process is put in a job object of its own; Kill, and the
// plugin's exit, terminate the job: the plugin and the processes it
// started (except one started in the instant before it joined the job).
// Where no job can be made, Kill terminates the plugin alone, through its
// process handle, never another process.
//
// If the host dies without stopping it (SIGKILL, the OOM killer, a
// timeout), on Linux the plugin is SIGKILLed with it: cmd gets
// SysProcAttr.Pdeathsig SIGKILL unless it sets another signal, and is
// forked from an OS thread that redial keeps, as long as a plugin it
// started is unreaped, because Linux sends that signal when the thread
// that forked the child ends, and Go ends the thread of any goroutine that
// returns with it locked. Only the plugin gets the signal: its own
// children, and any child that left its group (setpgid, setsid), are the
// plugin's to end. On Windows the job is closed with the host, which ends
// the processes in it. On other systems the plugin outlives a host that
// dies without stopping it.
//
// The Process is reaped by a goroutine of its own, which ends when the
// process has exited; cmd.Wait must not be called by anyone else.
func StartGroup(cmd *exec.Cmd) (*Process, error) {
	g, err := startGroup(cmd)
	if err != nil {
		return nil, err
	}
	return g.proc, nil
}

// PID returns the process id.
func (p *Process) PID() int { return p.pid }

// Done returns a channel that is closed when the process has exited.
func (p *Process) Done() <-chan struct{} {
	if p.gone == nil {
		return nil
	}
	return p.gone.Done()
}

// Exit returns how the process ended, and false while it still runs.
func (p *Process) Exit() (Exit, bool) {
	select {
	case <-p.Done():
		return p.exit, true
	default:
		return Exit{}, false
	}
}

// Dying reports whether the process has exited or its death is under way,
// without waiting for its reaper: its exit is reported, or, on Linux, the
// kernel has it as a zombie, has reaped it, or has a SIGKILL pending for
// it (one read of /proc/<pid>/status). The kernel knows at once what a
// loaded host learns late: the exits of 50 plugins SIGKILLed at once were
// reported 300–500 ms later on 2 busy cores. Elsewhere it is [Process.Exit]'s
// answer.
func (p *Process) Dying() bool {
	if _, exited := p.Exit(); exited {
		return true
	}
	if p.pid <= 0 {
		return false
	}
	_, ok := procfs.Dying(p.pid)
	return ok
}

// errNoProcess is Kill's error for a Process that names no process.
var errNoProcess = errors.New("redial: Process has no kill func and no valid pid")

// Kill stops the process. It is how a hung plugin is put down: unless redial
// was already stopping it, its exit is reported with [ExitHung]. Without a
// kill func it SIGKILLs (on Windows: terminates) the pid alone, unless an
// exit has already been reported; a pid of 0 or less is then an error,
// never a signal to a process group or to every process.
func (p *Process) Kill() error {
	p.MarkStopping(ExitHung)
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

// Report records that the process has exited. Only the first report counts.
// The hook leaves e.Reason zero; redial fills in the stop it started.
// Report, MarkStopping and KeepStderr are for the Respawner that made the
// Process (and redial): a host that reads a Generation's Process must not
// call them, as redial takes a report for the plugin's death.
func (p *Process) Report(e Exit) {
	p.once.Do(func() {
		if e.Reason == ExitCrashed {
			e.Reason = ExitReason(p.reason.Load())
		}
		p.exit = e
		p.exited.Store(true)
		p.markGone()
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
