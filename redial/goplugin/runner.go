package goplugin

import (
	"context"
	"io"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-plugin/runner"

	"github.com/grpc-respawn/respawn/redial/internal/proc"
)

// pipeGrace is how long the plugin's stdout and stderr stay open after the
// process is reaped, so go-plugin can log its last words (a panic trace)
// before a grandchild that left the plugin's process group, and still holds
// the pipes, is cut off.
const pipeGrace = time.Second

// procRunner is a runner.Runner for a plugin binary. It does what go-plugin's
// own runner (internal/cmdrunner, which cannot be imported) does, with three
// differences that matter to redial:
//
//   - it starts the plugin with the exec hook's launcher (proc.Start): the
//     plugin leads a process group of its own, so a plugin launched
//     through "sh -c" and its children are killed with it, and the group
//     is signalled only while its leader is unreaped;
//   - it reaps the process as soon as it exits and reports the exit, with
//     its code or signal (an OOM kill is SIGKILL).
//     go-plugin calls Wait only once it has drained stdout and stderr, which
//     a grandchild holding the pipes could delay forever: they are closed
//     pipeGrace after the process is reaped;
//   - its pipes are the launcher's (os.Pipe, not StdoutPipe), so reaping
//     does not close them under go-plugin's readers.
type procRunner struct {
	cmd *exec.Cmd

	// Set by Start, before go-plugin calls any other method; proc is also
	// read by the hook while Start may still run, hence atomic.
	proc           atomic.Pointer[proc.Process]
	stdout, stderr *os.File
	pid            int

	tail      proc.Tail // the end of stderr, quoted in launch errors
	handshake firstLine // the first line of stdout

	waited chan struct{} // closed once Wait has returned: go-plugin has collected the exit
	once   sync.Once     // closes waited

	closeOnce sync.Once
	mu        sync.Mutex
	closer    *time.Timer // closes the pipes pipeGrace after the reaping
}

var _ runner.Runner = (*procRunner)(nil)

func newProcRunner(cmd *exec.Cmd) *procRunner {
	return &procRunner{cmd: cmd, waited: make(chan struct{})}
}

// Start starts the process. go-plugin bounds the handshake that follows
// with its StartTimeout, not with ctx.
func (r *procRunner) Start(context.Context) error {
	p, stdout, stderr, err := proc.Start(r.cmd)
	if err != nil {
		return err
	}
	r.stdout, r.stderr = stdout, stderr
	r.pid = p.PID()
	p.KeepStderr(&r.tail)
	r.proc.Store(p)
	context.AfterFunc(p.Exited(), func() {
		// If something else still holds the pipes, close them, so that
		// go-plugin's readers, and with them Client.Kill, end.
		r.mu.Lock()
		if r.closer == nil {
			r.closer = time.AfterFunc(pipeGrace, r.closePipes)
		}
		r.mu.Unlock()
	})
	return nil
}

// Wait waits for the process to be reaped. go-plugin calls it once it has
// read stdout and stderr to the end, so the pipes can be closed. Its error
// is what exec.Cmd.Wait returned: an *exec.ExitError unless the plugin
// exited with code 0.
func (r *procRunner) Wait(context.Context) error {
	defer r.once.Do(func() { close(r.waited) })
	<-r.proc.Load().Done()
	r.mu.Lock()
	if r.closer != nil {
		r.closer.Stop()
	}
	r.mu.Unlock()
	r.closePipes()
	// ProcessState was set before the exit was reported.
	if ps := r.cmd.ProcessState; ps != nil && !ps.Success() {
		return &exec.ExitError{ProcessState: ps}
	}
	return nil
}

// Kill SIGKILLs the plugin's process group and waits until the plugin is
// reaped. go-plugin calls it when a start fails: a plugin that is exiting
// by itself meanwhile is reported as crashed (see proc.Process.Abandon).
func (r *procRunner) Kill(ctx context.Context) error {
	p := r.proc.Load()
	if p == nil {
		return nil
	}
	p.Abandon() // unless redial said why first, or the plugin is dying
	err := p.Stop()
	select {
	case <-p.Done():
	case <-ctx.Done():
		return ctx.Err()
	}
	return err
}

func (r *procRunner) closePipes() {
	r.closeOnce.Do(func() {
		r.stdout.Close()
		r.stderr.Close()
	})
}

// Stdout and Stderr keep the handshake line and the end of stderr as
// go-plugin reads them, so that a failed launch can say what happened.
func (r *procRunner) Stdout() io.ReadCloser {
	return teeCloser{io.TeeReader(r.stdout, &r.handshake), r.stdout}
}
func (r *procRunner) Stderr() io.ReadCloser {
	return teeCloser{io.TeeReader(r.stderr, &r.tail), r.stderr}
}

type teeCloser struct {
	io.Reader
	io.Closer
}

func (r *procRunner) Name() string { return r.cmd.Path }

// ID is the pid, "" before Start: go-plugin's Kill does nothing then.
func (r *procRunner) ID() string {
	if r.pid == 0 {
		return ""
	}
	return strconv.Itoa(r.pid)
}

func (r *procRunner) Diagnose(context.Context) string { return "" }

// The plugin runs on this host: addresses need no translation.
func (r *procRunner) PluginToHost(network, addr string) (string, string, error) {
	return network, addr, nil
}

func (r *procRunner) HostToPlugin(network, addr string) (string, string, error) {
	return network, addr, nil
}
