// This file is the kit of a hook author: the interface a hook implements
// ([Respawner]), what it is asked ([Request]) and returns ([Backend]), and
// the handle of the plugin's process ([Process], [NewProcess], [Exit]).

package redial

import (
	"context"
	"sync/atomic"
	"syscall"
	"time"

	"google.golang.org/grpc"

	"github.com/grpc-respawn/respawn/redial/internal/proc"
)

// A Respawner starts a fresh plugin and tells redial how to reach it. It is
// the hook a host plugs in: package command's Hook execs a binary, and
// package goplugin's launches a hashicorp/go-plugin client.
//
// Respawn runs detached from any one caller, under the Conn's respawn timeout:
// it must return when ctx is done. A Conn calls it for one respawn at a time,
// but a call that ignores ctx is abandoned when the timeout ends and may
// still be running when the next respawn calls it again.
type Respawner interface {
	Respawn(ctx context.Context, req Request) (Backend, error)
}

// Request says what a respawn is for.
type Request struct {
	// Generation is the number the new plugin will have; the first is 1.
	Generation uint64
	// Cause is the failure that condemned the previous plugin, nil for the
	// first launch.
	Cause error
	// DialOptions are the Conn's dial options for a hook that dials the
	// plugin itself: those given to [WithDialOptions], then those of the
	// call policy (its interceptors, bound to this Conn), and not redial's
	// default insecure credentials, which are for Targets only. A Respawner
	// that dials the plugin itself, rather than returning a Target, must
	// include them, after its own, so that the host's interceptors run and
	// calls made on the connection it returns are classified, rerouted and
	// retried too. The slice is the hook's to keep, not to modify.
	DialOptions []grpc.DialOption
	// Spare is set when the plugin is launched as a spare (Pacing.Spares):
	// Generation is then 0, since its number is given when it is promoted,
	// which may be much later or never.
	Spare bool
	// Env holds what the plugin's environment must have, as "KEY=value":
	// with a call policy that keeps ledgers (interceptor.WithLedger), the
	// path of this launch's ledger file and its key (RESPAWN_LEDGER,
	// RESPAWN_LEDGER_KEY). A hook that
	// starts a process adds them to its environment, after its own; the
	// hooks of packages command and goplugin do.
	Env []string
}

// Backend is what a [Respawner] returns: a started plugin and either a
// connection to it or a target for redial to dial.
type Backend struct {
	// Conn, if non-nil, is a connection the hook dialled itself (for
	// instance go-plugin's). redial closes it when the plugin is retired.
	// Its credentials are the hook's choice and responsibility: redial
	// neither adds nor checks any.
	Conn *grpc.ClientConn
	// Target is dialled with the Conn's dial options when Conn is nil, for
	// instance "unix:///tmp/plugin-123/plugin.sock".
	Target string
	// Process, if non-nil, is the plugin's process. redial reports its exit
	// as an event, stops waiting out the grace period of a retired plugin
	// once it has exited, and health checks can kill it when it hangs.
	Process *Process
	// Stop, if non-nil, releases the plugin once redial is done with it:
	// it kills the process if it still runs, reaps it and removes its
	// socket. It is called exactly once, also for a Backend that redial
	// could not use (a dial failure, a respawn that timed out).
	Stop func() error
	// Promote, if non-nil, is called when the plugin, launched as a spare
	// (Pacing.Spares, Request.Spare), becomes the current plugin: for
	// instance to replay host state into it then, so that a spare never
	// serves state that went stale while it waited. redial calls it before
	// any call is sent to the plugin, under the respawn timeout; if it
	// fails, the spare is discarded and a plugin launched instead. It runs
	// on the critical path of the recovery: it should be quick. It is
	// never called for a plugin launched to serve at once.
	Promote func(ctx context.Context) error

	ledger *ledgerFile // the launch's ledger file, nil without ledgers
}

// stop releases the plugin and closes its connection. A connection redial
// dialled itself (to Target) is closed first, so that our own open streams
// do not hold up a plugin that Stop asks to exit gracefully; a hook's own
// Conn is closed after Stop, which may need it (go-plugin's Shutdown RPC).
// Only Stop's error is returned: closing a connection that the hook's Stop
// closed already fails, harmlessly.
func (b Backend) stop() error {
	dialled := b.Target != "" && b.Conn != nil
	if dialled {
		_ = b.Conn.Close()
	}
	var err error
	if b.Stop != nil {
		err = b.Stop()
	}
	if b.Conn != nil && !dialled {
		_ = b.Conn.Close()
	}
	return err
}

// Exit says how a plugin process ended.
type Exit struct {
	PID int // the process id
	// Code is the exit code, or -1 if the process was killed by a signal.
	Code int
	// Signal is the signal that killed the process, 0 if it exited by itself.
	// An OOM kill shows up as syscall.SIGKILL.
	Signal syscall.Signal
	// Reason says whether redial stopped the process, and why: one of
	// [ExitCrashed], [ExitHungKilled], [ExitRetired], [ExitAbandoned],
	// [ExitClosed].
	Reason ExitReason
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
	// or hung and was killed by redial ([ExitHungKilled]). It is false for the
	// other stops redial makes, for SIGTERM, SIGINT and SIGHUP, which only
	// another process sends, and for a SIGKILL the kernel's count of OOM
	// kills (see OOMKilled) says the OOM killer did not send. Where that
	// count cannot be read (outside Linux, a process of [NewProcess]), every
	// SIGKILL may be an OOM kill.
	SelfInflicted bool
}

// ExitReason says whether redial stopped a plugin's process, and why. Its
// values are the constants below; a host compares with them.
type ExitReason string

// The reasons of an [Exit].
const (
	// ExitCrashed: nobody in this host asked the process to end: it exited,
	// or something outside killed it. Only these exits are crashes.
	ExitCrashed = ExitReason(proc.Crashed)
	// ExitHungKilled: redial killed it because it hung (the health probe's
	// verdict, [EventHung]).
	ExitHungKilled = ExitReason(proc.Hung)
	// ExitRetired: redial stopped it after a newer plugin replaced it.
	ExitRetired = ExitReason(proc.Retired)
	// ExitAbandoned: it was stopped because its launch failed or timed out
	// before it was ready.
	ExitAbandoned = ExitReason(proc.Abandoned)
	// ExitClosed: [Conn.Close] stopped it.
	ExitClosed = ExitReason(proc.Closed)
)

// exitOf converts the exit that package proc reports.
func exitOf(e proc.Exit) Exit {
	return Exit{PID: e.PID, Code: e.Code, Signal: e.Signal, Reason: ExitReason(e.Reason), OOMKilled: e.OOMKilled, SelfInflicted: e.SelfInflicted}
}

// proc converts e to the exit that package proc reports.
func (e Exit) proc() proc.Exit {
	return proc.Exit{PID: e.PID, Code: e.Code, Signal: e.Signal, Reason: proc.Reason(e.Reason), OOMKilled: e.OOMKilled, SelfInflicted: e.SelfInflicted}
}

// describe says what happened in words, as errors and logs quote it: "pid
// 42 killed by signal 9 (killed), retired".
func (e Exit) describe() string { return e.proc().String() }

// Process is the handle of a plugin's process, which a [Respawner] puts in
// its [Backend]: the hooks of packages command and goplugin do, and a hook
// that starts a process itself makes one with [NewProcess]. It is safe for
// concurrent use; the zero value names no process and never exits.
type Process struct {
	// PID is the process id. It must not change.
	PID int

	p       *proc.Process
	emitted atomic.Bool // redial has emitted its exit
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
// terminates) pid alone, and only while no exit has been reported. For a
// hook that started cmd itself:
//
//	p, exited := redial.NewProcess(cmd.Process.Pid, cmd.Process.Kill)
//	go func() {
//		_ = cmd.Wait()
//		e := redial.Exit{PID: cmd.Process.Pid, Code: cmd.ProcessState.ExitCode()}
//		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
//			e.Signal = ws.Signal()
//		}
//		exited(e)
//	}()
func NewProcess(pid int, kill func() error) (p *Process, exited func(Exit)) {
	pp := proc.New(pid, kill)
	return newProcess(pp), func(e Exit) { pp.Report(e.proc()) }
}

// Exited returns the exit signal of the process: a context that ends when
// its exit is reported, whose cause ([context.Cause]) is the exit, an error
// that says how the process ended and quotes the end of its stderr (it
// unwraps to the process's *exec.ExitError when its state is known).
// Select on its Done channel, or hang a func on it with
// [context.AfterFunc], which runs it at the exit with no goroutine waiting
// meanwhile. A zero Process never exits: its context never ends.
func (p *Process) Exited() context.Context {
	if p.p == nil {
		return context.Background()
	}
	return p.p.Exited()
}

// Done returns the Done channel of [Process.Exited] (nil for a zero
// Process).
func (p *Process) Done() <-chan struct{} { return p.Exited().Done() }

// Await waits for the process to exit, at most max and until ctx ends,
// and reports whether it is dead: its exit reported, or, once max has
// passed without the report (at once for max <= 0), its death under way
// as the kernel tells: on Linux a zombie, reaped, or with a SIGKILL pending
// (one read of /proc/<pid>/status). The kernel knows at once what a loaded
// host's reaper reports late: the exits of 50 plugins SIGKILLed at once
// were reported 300–500 ms later on 2 busy cores. How it died is in
// [Process.Exit] once reported. A nil or zero Process, which never exits,
// waits out max or ctx and is never dead.
func (p *Process) Await(ctx context.Context, max time.Duration) (dead bool) {
	var pp *proc.Process // nil for a nil or zero Process
	if p != nil {
		pp = p.p
	}
	return pp.Await(ctx, max)
}

// ended reports whether the exit has been reported, in one atomic load;
// false for a nil or zero Process.
func (p *Process) ended() bool { return p != nil && p.p.Ended() }

// Exit returns how the process ended, and false while it still runs.
func (p *Process) Exit() (Exit, bool) {
	if p.p == nil {
		return Exit{}, false
	}
	e, ok := p.p.Exit()
	return exitOf(e), ok
}

// kill stops the process, which is reported as hung-killed unless redial
// was already stopping it.
func (p *Process) kill() error {
	if p.p == nil {
		return nil
	}
	return p.p.Kill()
}

// markStopping records why redial is about to stop the process.
func (p *Process) markStopping(reason proc.Reason) {
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

// exitError is the cause of a launch or a generation ended by p's exit:
// the cause of [Process.Exited], nil while p runs.
func (p *Process) exitError() error { return context.Cause(p.Exited()) }
