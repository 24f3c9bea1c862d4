//go:build unix

package proc

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"sync"
	"syscall"

	"github.com/grpc-respawn/respawn/internal/procfs"
)

// group is a started plugin that leads a process group of its own.
type group struct {
	cmd  *exec.Cmd
	pid  int // the leader's pid, and the group's id
	proc *Process
	oom  oomCount // the kernel's count of OOM kills as the plugin started

	mu sync.Mutex
	// reaped is set, under mu, before the leader is reaped: from then on
	// its pid, and so the group id, may be anyone's, and nothing signals it.
	reaped bool
}

// spawnGroup starts cmd as the leader of a new process group; the caller
// reaps it.
func spawnGroup(cmd *exec.Cmd) (*group, error) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	if !cmd.SysProcAttr.Setsid { // a session leader leads its group already
		cmd.SysProcAttr.Setpgid, cmd.SysProcAttr.Pgid = true, 0
	}
	oom := oomCountFor(cmd)
	release, err := startCmd(cmd)
	if err != nil {
		oom.close()
		return nil, err
	}
	g := &group{cmd: cmd, pid: cmd.Process.Pid, oom: oom}
	g.proc = New(g.pid, g.kill)
	g.proc.term = g.terminate
	g.proc.status = procfs.OpenStatus(g.pid)    // ours and unreaped: pid names it
	context.AfterFunc(g.proc.Exited(), release) // reported once reaped
	return g, nil
}

// reap waits for the leader to exit, kills the rest of its group while the
// leader is a zombie (where the system can tell, see waitExited), runs
// flush if not nil, reaps the leader and reports its exit. Where the
// system cannot tell (or reaps children itself: SIGCHLD ignored), it
// waits as os/exec does, stops signalling just before, and runs flush
// once the leader is reaped.
func (g *group) reap(flush func()) {
	if waitExited(g.pid) == nil {
		g.reapExited(flush)
		return
	}
	_ = g.cmd.Wait()
	g.mu.Lock()
	g.reaped = true
	g.mu.Unlock()
	if flush != nil {
		flush()
	}
	g.report()
}

// reapExited finishes the leader, known to have exited and not to be
// reaped: it kills the rest of its group, runs flush (which reads what the
// plugin left in its pipes), reaps the leader and the members of its group
// that have become ours, and reports its exit.
func (g *group) reapExited(flush func()) {
	g.mu.Lock()
	killed := exitedUnreaped(g.pid) // not if the system reaped it (SIGCHLD ignored): the group id may be anyone's
	if killed {
		_ = syscall.Kill(-g.pid, syscall.SIGKILL) // the plugin's children go with it
	}
	g.reaped = true
	g.mu.Unlock()
	if flush != nil {
		flush()
	}
	_ = g.cmd.Wait()
	if killed {
		reapGroup(g.pid)
	}
	g.report()
}

// report reports the reaped leader's exit; a SIGKILL carries whether the
// kernel counted an OOM kill since the plugin started.
func (g *group) report() {
	ps := g.cmd.ProcessState
	e, oom := exitOf(g.pid, ps), oomUnknown
	if e.Signal == syscall.SIGKILL {
		oom = g.oom.since()
	}
	g.oom.close()
	g.proc.report(e, ps, oom)
}

// signal sends sig to the whole group while its leader is unreaped; once it
// is reaped there is nothing left that is known to be ours, and signal does
// nothing.
func (g *group) signal(sig syscall.Signal) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.reaped {
		return nil
	}
	if err := syscall.Kill(-g.pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("redial: signal %v to plugin group %d: %w", sig, g.pid, err)
	}
	return nil
}

// kill SIGKILLs the group: the Process's kill func.
func (g *group) kill() error { return g.signal(syscall.SIGKILL) }

// terminate asks the group to stop, with SIGTERM, then SIGCONT, as
// systemd does: a stopped plugin (SIGSTOP, a debugger, a freezer) handles
// SIGTERM only once continued, and would otherwise wait out the grace.
func (g *group) terminate() error {
	if err := g.signal(syscall.SIGTERM); err != nil {
		return err
	}
	return g.signal(syscall.SIGCONT)
}

// killPID SIGKILLs pid alone; pid > 0.
func killPID(pid int) error {
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("redial: kill pid %d: %w", pid, err)
	}
	return nil
}
