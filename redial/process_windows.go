package redial

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
)

// group is a started plugin. Windows has no process groups that can be
// signalled: the plugin alone is terminated, through its process handle,
// which cannot name another process.
type group struct {
	cmd  *exec.Cmd
	pid  int
	proc *Process
}

// startGroup starts cmd and reaps it when it exits.
func startGroup(cmd *exec.Cmd) (*group, error) {
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	g := &group{cmd: cmd, pid: cmd.Process.Pid}
	g.proc = NewProcess(g.pid, g.kill)
	go func() {
		_ = cmd.Wait()
		g.proc.Report(ExitOf(g.pid, cmd.ProcessState))
	}()
	return g, nil
}

// kill terminates the process; after it has been waited for, it does nothing.
func (g *group) kill() error {
	if err := g.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("redial: terminate plugin %d: %w", g.pid, err)
	}
	return nil
}

// terminate is kill: there is no SIGTERM to ask a windowless process to stop.
func (g *group) terminate() error { return g.kill() }

// canTerminate says whether terminate asks rather than kills.
const canTerminate = false

// killPID terminates pid; pid > 0.
func killPID(pid int) error {
	p, err := os.FindProcess(pid)
	if err != nil {
		return fmt.Errorf("redial: kill pid %d: %w", pid, err)
	}
	defer p.Release()
	if err := p.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("redial: kill pid %d: %w", pid, err)
	}
	return nil
}
