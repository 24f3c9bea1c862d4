package redial

import (
	"sync/atomic"
	"syscall"

	"github.com/grpc-respawn/respawn/redial/internal/proc"
)

// Exit says how a plugin process ended.
type Exit struct {
	PID int // the process id
	// Code is the exit code, or -1 if the process was killed by a signal.
	Code int
	// Signal is the signal that killed the process, 0 if it exited by itself.
	// An OOM kill shows up as syscall.SIGKILL.
	Signal syscall.Signal
	// Reason says whether redial stopped the process, and why:
	//   - "crashed": nobody in this host asked it to end: it exited, or
	//     something outside killed it. Only these exits are crashes;
	//   - "hung-killed": redial killed it because it hung (the health
	//     probe's verdict, [EventHung]);
	//   - "retired": redial stopped it after a newer plugin replaced it;
	//   - "launch-abandoned": it was stopped because its launch failed or
	//     timed out before it was ready;
	//   - "closed": [Conn.Close] stopped it.
	Reason string
	// OOMKilled is set for a SIGKILL while the kernel counted an OOM kill
	// (Linux, for a plugin started by redial's hooks): its memory cgroup's
	// oom_kill count in memory.events (memory.oom_control under cgroup v1;
	// the host's in /proc/vmstat where the cgroup's cannot be read), read
	// as the plugin starts and when it is reaped. A plugin that moves
	// itself to another memory cgroup is judged by the count of the one it
	// started in.
	OOMKilled bool
	// SelfInflicted says whether the plugin's own work may have ended it,
	// so that a call in it when it died may be what killed it: it exited by
	// itself (a Go panic exits 2, as does the runtime when memory runs
	// out), crashed on a signal raised by its own fault (SIGSEGV, SIGBUS,
	// SIGABRT, SIGILL, SIGFPE, ...), was killed by the kernel's OOM killer,
	// or hung and was killed by redial ("hung-killed"). It is false for the
	// other stops redial makes, for SIGTERM, SIGINT and SIGHUP, which only
	// another process sends, and for a SIGKILL the kernel's count of OOM
	// kills (see OOMKilled) says the OOM killer did not send. Where that
	// count cannot be read (outside Linux, a process of [NewProcess]), every
	// SIGKILL may be an OOM kill.
	SelfInflicted bool
}

// describe says what happened in words, as errors and logs quote it: "pid
// 42 killed by signal 9 (killed), retired".
func (e Exit) describe() string { return proc.Exit(e).String() }

// Process is the handle of a plugin's process, which a [Respawner] puts in
// its [Backend]: the hooks of packages command and goplugin do, and a hook
// that starts a process itself makes one with [NewProcess]. It is safe for
// concurrent use; the zero value names no process and never exits.
type Process struct {
	// PID is the process id. It must not change.
	PID int

	p        *proc.Process
	reported atomic.Bool // redial has emitted its exit
}

func init() {
	proc.Public = func(p *proc.Process) any { return newProcess(p) }
	proc.Of = func(h any) *proc.Process {
		if p, _ := h.(*Process); p != nil {
			return p.p
		}
		return nil
	}
}

// newProcess returns the handle of p, nil for none.
func newProcess(p *proc.Process) *Process {
	if p == nil {
		return nil
	}
	return &Process{PID: p.PID(), p: p}
}

// NewProcess returns the handle of process pid, which a hook started and
// reaps itself, and the function that reports its exit: call it once the
// process is reaped (cmd.Wait has returned), with its PID, Code and
// Signal; redial fills in the Reason, SelfInflicted and OOMKilled fields.
// Only the first report counts. kill must stop the process (and its
// children) and may be called more than once: redial calls it when a
// health check finds the plugin hung. A nil kill SIGKILLs (on Windows:
// terminates) pid alone, and only while no exit has been reported.
func NewProcess(pid int, kill func() error) (p *Process, exited func(Exit)) {
	pp := proc.New(pid, kill)
	return newProcess(pp), func(e Exit) { pp.Report(proc.Exit(e)) }
}

// Done returns a channel that is closed when the process has exited (nil
// for a zero Process).
func (p *Process) Done() <-chan struct{} {
	if p.p == nil {
		return nil
	}
	return p.p.Done()
}

// Exit returns how the process ended, and false while it still runs.
func (p *Process) Exit() (Exit, bool) {
	if p.p == nil {
		return Exit{}, false
	}
	e, ok := p.p.Exit()
	return Exit(e), ok
}

// Dying reports whether the process has exited or its death is under way,
// without waiting for its reaper: its exit is reported, or, on Linux, the
// kernel has it as a zombie, has reaped it, or has a SIGKILL pending for
// it (one read of /proc/<pid>/status). The kernel knows at once what a
// loaded host learns late: the exits of 50 plugins SIGKILLed at once were
// reported 300–500 ms later on 2 busy cores. Elsewhere it is
// [Process.Exit]'s answer.
func (p *Process) Dying() bool { return p.p != nil && p.p.Dying() }

// kill stops the process, which is reported as hung-killed unless redial
// was already stopping it.
func (p *Process) kill() error {
	if p.p == nil {
		return nil
	}
	return p.p.Kill()
}

// markStopping records why redial is about to stop the process.
func (p *Process) markStopping(reason string) {
	if p.p != nil {
		p.p.MarkStopping(reason)
	}
}

// stderr returns the end of the plugin's stderr, "" if the hook keeps none.
func (p *Process) stderr() string {
	if p.p == nil {
		return ""
	}
	return p.p.Stderr()
}

// exited is set once the exit has been reported.
func (p *Process) exited() *atomic.Bool {
	if p.p == nil {
		return &never
	}
	return p.p.Exited()
}

// afterExit runs f on a goroutine of its own once the process has exited;
// stop cancels it, as [context.AfterFunc]'s stop. A zero Process, which
// has no exit to wait for, never runs f.
func (p *Process) afterExit(f func()) (stop func() bool) {
	if p.p == nil {
		return func() bool { return true }
	}
	return p.p.AfterExit(f)
}

// exitError is the cause of a launch or a generation ended by p's exit,
// nil while p runs.
func (p *Process) exitError() error {
	if p.p == nil {
		return nil
	}
	if ee := proc.ExitErrorOf(p.p); ee != nil {
		return ee
	}
	return nil
}
