package proc

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"unsafe"

	"golang.org/x/sys/windows"
)

// group is a started plugin and, where one could be made, a job object
// holding it and the processes it starts, so that they die together. The
// job is ours (a handle, not a reusable id): terminating it never reaches
// another process. A child the plugin starts in the instant between its
// start and its assignment to the job is not in it.
type group struct {
	cmd  *exec.Cmd
	pid  int
	proc *Process

	mu  sync.Mutex
	job windows.Handle // 0 if no job could be made, or once closed
}

// spawnGroup starts cmd in a job of its own; the caller reaps it.
func spawnGroup(cmd *exec.Cmd) (*group, error) {
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	g := &group{cmd: cmd, pid: cmd.Process.Pid, job: newJob(cmd.Process.Pid)}
	g.proc = New(g.pid, g.kill)
	return g, nil
}

// reap waits for the plugin to exit, terminates what is left of its job,
// runs flush if not nil and reports the exit.
func (g *group) reap(flush func()) {
	_ = g.cmd.Wait()
	g.mu.Lock()
	if g.job != 0 { // the plugin's children go with it
		_ = windows.TerminateJobObject(g.job, 1)
		_ = windows.CloseHandle(g.job)
		g.job = 0
	}
	g.mu.Unlock()
	if flush != nil {
		flush()
	}
	ps := g.cmd.ProcessState
	g.proc.report(exitOf(g.pid, ps), ps, oomUnknown)
}

// newJob puts the running process pid (its handle is held by os/exec, so
// the id is not reused) in a new job that kills its processes when closed.
// It returns 0 if any step fails: the plugin is then terminated alone.
func newJob(pid int) windows.Handle {
	job, err := windows.CreateJobObject(nil, nil)
	if err != nil {
		return 0
	}
	info := windows.JOBOBJECT_EXTENDED_LIMIT_INFORMATION{
		BasicLimitInformation: windows.JOBOBJECT_BASIC_LIMIT_INFORMATION{LimitFlags: windows.JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE},
	}
	if _, err := windows.SetInformationJobObject(job, windows.JobObjectExtendedLimitInformation,
		uintptr(unsafe.Pointer(&info)), uint32(unsafe.Sizeof(info))); err != nil {
		_ = windows.CloseHandle(job)
		return 0
	}
	h, err := windows.OpenProcess(windows.PROCESS_SET_QUOTA|windows.PROCESS_TERMINATE, false, uint32(pid))
	if err != nil {
		_ = windows.CloseHandle(job)
		return 0
	}
	defer windows.CloseHandle(h)
	if err := windows.AssignProcessToJobObject(job, h); err != nil {
		_ = windows.CloseHandle(job)
		return 0
	}
	return job
}

// kill terminates the plugin's job, or the plugin alone if it has none;
// after the plugin has been waited for, it does nothing.
func (g *group) kill() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.job != 0 {
		if err := windows.TerminateJobObject(g.job, 1); err != nil {
			return fmt.Errorf("redial: terminate plugin %d's job: %w", g.pid, err)
		}
		return nil
	}
	if err := g.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("redial: terminate plugin %d: %w", g.pid, err)
	}
	return nil
}

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

// exitedUnreaped is never known here.
func exitedUnreaped(int) bool { return false }
