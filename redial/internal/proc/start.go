package proc

import (
	"context"
	"io"
	"os"
	"os/exec"
	"time"
)

// launch starts cmd, which must not have been started, as the leader of a
// process group of its own (see [Start]), with its stdout and stderr
// on pipes of its own, whose read ends it returns; the caller reaps it.
// The write ends are *os.Files, which os/exec hands to the child with no
// copying goroutine, so that reaping the process (cmd.Wait) neither waits
// for nor closes what the plugin wrote: only the child holds them, and its
// group's end means EOF. cmd.Stdout and cmd.Stderr are set here.
func launch(cmd *exec.Cmd) (g *group, stdout, stderr *os.File, err error) {
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, nil, nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		_, _ = outR.Close(), outW.Close()
		return nil, nil, nil, err
	}
	cmd.Stdout, cmd.Stderr = outW, errW
	g, err = spawnGroup(cmd)
	_, _ = outW.Close(), errW.Close()
	if err != nil {
		_, _ = outR.Close(), errR.Close()
		return nil, nil, nil, err
	}
	return g, outR, errR, nil
}

// Start starts cmd, which must not have been started, as the leader of a
// process group of its own (a job object on Windows), with the
// parent-death signal on Linux and its stdout and stderr on pipes, whose
// read ends the caller reads and closes, and reaps it on a goroutine of
// its own, which reports its exit; cmd.Wait must not be called by anyone
// else. It is the go-plugin hook's launcher; [StartReading] is the exec
// hook's.
//
// On Unix the plugin's group is signalled only while its leader is known
// not to be reaped, so that the group id cannot belong to anyone else yet.
// On Linux that is exact (waitid with WNOWAIT): when the leader exits,
// whatever is left of its group is killed while the leader is a zombie,
// then the leader is reaped and its exit reported, so the plugin's
// children never outlive it; those the host has inherited (a host that is
// PID 1 or a child subreaper) are reaped before the exit is reported (one
// that cannot die yet, held in D state or by a freezer, delays the report
// by at most 1s and is reaped once it dies). On other Unix systems the
// reaper reaps first and the group is signalled until just before, a
// window of a few instructions for the pid to be reused; children of a
// plugin that exits by itself are left alone there. A child that made
// itself a session of its own (setsid) is no longer the plugin's and is
// never signalled.
//
// On Windows Kill, and the plugin's exit, terminate the job: the plugin
// and the processes it started (except one started in the instant before
// it joined the job). Where no job can be made, Kill terminates the
// plugin alone, through its process handle, never another process.
//
// If the host dies without stopping it, on Linux the plugin is SIGKILLed
// with it: cmd gets SysProcAttr.Pdeathsig SIGKILL unless it sets another
// signal, and is forked from an OS thread kept for as long as a plugin it
// started is unreaped, because Linux sends that signal when the thread
// that forked the child ends. Only the plugin gets the signal: its own
// children, and any child that left its group, are the plugin's to end.
// On Windows the job is closed with the host, which ends the processes in
// it. Elsewhere the plugin outlives a host that dies without stopping it.
func Start(cmd *exec.Cmd) (p *Process, stdout, stderr *os.File, err error) {
	g, stdout, stderr, err := launch(cmd)
	if err != nil {
		return nil, nil, nil, err
	}
	go g.reap(nil)
	return g.proc, stdout, stderr, nil
}

// Line is the first line of a plugin's stdout, as [StartReading] reads it.
type Line struct {
	Text string // the line, with its newline if it had one
	Err  error  // non-nil if the line is longer than the limit
}

// Reading is a plugin [StartReading] started: its process, the read end of
// its stdout, and the first line of that stdout once it is printed.
type Reading struct {
	Proc   *Process
	Stdout *os.File    // closed by the caller once done with the plugin
	Lines  <-chan Line // the first line, once
}

// StartReading starts cmd as [Start] does, with its pipes read here: the
// first line of its stdout, at most limit bytes of it, is sent on Lines,
// and the rest of stdout is drained, so that the plugin never blocks on a
// full pipe; its stderr is written to w, on a goroutine of this package's
// that also sees the plugin's exit, so w must not block. It is the exec
// hook's launcher.
//
// On Linux one goroutine does all the waiting an idle plugin needs: an
// epoll instance, itself in the runtime's poller, holds the plugin's pidfd
// and the read ends of its stdout and stderr, so that reading the line,
// draining stdout, copying stderr and reaping take one parked goroutine and
// no thread, where os/exec and a blocking waitid take three goroutines,
// one of them in a system call. Without pidfds (Linux before 5.3, or a
// seccomp filter), and elsewhere, it takes a goroutine each.
func StartReading(cmd *exec.Cmd, limit int, w io.Writer) (*Reading, error) {
	g, stdout, stderr, err := launch(cmd)
	if err != nil {
		return nil, err
	}
	r := &Reading{Proc: g.proc, Stdout: stdout}
	r.Lines = readPipes(g, stdout, stderr, limit, w)
	return r, nil
}

// readWithGoroutines reads the plugin's pipes with a goroutine each, and
// reaps it with a third, which lets the stderr copy finish (up to a
// second) before it reports the exit, as os/exec's WaitDelay does.
func readWithGoroutines(g *group, stdout, stderr *os.File, limit int, w io.Writer) <-chan Line {
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		_, _ = io.Copy(w, stderr)
	}()
	go g.reap(func() {
		t := time.NewTimer(time.Second)
		defer t.Stop()
		select {
		case <-copied:
		case <-t.C:
		}
		_ = stderr.Close()
	})
	return readStdout(g, stdout, limit)
}

// readStdout reads the first line from stdout on a goroutine of its own,
// then drains stdout: a plugin must never block on a full pipe. Draining
// ends at EOF or when the plugin has exited and stdout is closed, even if
// a grandchild that left the plugin's group still holds the pipe.
func readStdout(g *group, stdout *os.File, limit int) <-chan Line {
	lines := make(chan Line, 1)
	go func() {
		line, err := readLine(stdout, limit)
		lines <- Line{line, err}
		// Only now: closed earlier, at the exit, a line still in the pipe
		// would be lost. Until the line is read, stopping the plugin closes
		// stdout.
		context.AfterFunc(g.proc.Exited(), func() { _ = stdout.Close() })
		_, _ = io.Copy(io.Discard, stdout)
	}()
	return lines
}
