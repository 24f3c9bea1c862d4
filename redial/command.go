package redial

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// Command is a [Respawner] that execs a plugin binary which prints the
// address it serves on as the first line of its stdout, either as a gRPC
// target ("unix:///tmp/p-1/plugin.sock", "127.0.0.1:7000") or as a
// hashicorp/go-plugin handshake line ("1|1|unix|/tmp/plugin42|grpc").
// The line may be at most [MaxAddressLine] bytes long.
//
// Each launch gets a private directory (mode 0700, under
// $PLUGIN_UNIX_SOCKET_DIR if the plugin's environment sets it, else under
// the temp dir), passed to the plugin as PLUGIN_UNIX_SOCKET_DIR, the
// variable go-plugin servers already use for their sockets. A plugin that
// puts its socket there leaves nothing behind, even when it is killed
// before it prints its address.
//
// Stopping a plugin (when redial retires it, or when the Conn closes) asks
// it to exit with SIGTERM to its process group, waits up to StopGrace, then
// SIGKILLs the group; a plugin that has already exited is not signalled at
// all. The plugin runs in a process group of its own (see [StartGroup]):
// its children are killed with it, and the group is only signalled while
// the plugin is known not to be reaped. Then Stop removes what is known to
// be the plugin's: the unix socket it printed, if that path is still the
// very socket that was there at handshake (same device and inode; a
// successor that bound the same path keeps its socket), and the private
// directory. Nothing else: not a regular file, not a directory the plugin
// did not get from Command.
//
// A plugin that exits, prints something else, prints a path that is not a
// unix socket, or prints nothing within StartTimeout is killed and the
// respawn fails with an error that quotes (at most 1 KiB of) what it printed.
// A relative socket path is resolved against Dir; with Dir empty it is an
// error, as it would name a file in the host's working directory.
//
// Only unix sockets and loopback addresses (localhost, 127.0.0.0/8, ::1)
// are accepted unless AllowRemote is set: the Conn dials the target with
// its own dial options, by default without transport security.
//
// On Windows the plugin is terminated at once rather than asked, with the
// processes it started (a job object, see [StartGroup]).
//
// The fields must not change once the Command is in use; its methods are
// safe for concurrent use.
type Command struct {
	Path string   // the binary; required
	Args []string // arguments, not including the binary
	Env  []string // the environment; nil means the host's
	Dir  string   // the working directory; empty means the host's
	// Stderr receives the plugin's stderr; nil discards it. Its Write is
	// called on a goroutine of redial's, never on the one that reaps the
	// plugin: a Write that blocks or is slow does not delay the sight of
	// the plugin's exit. It is called one call at a time per plugin, but
	// concurrently for the plugins of one Command (a plugin, its spares, a
	// retiring one): it must be safe for concurrent use, as os.Stderr is.
	// A plugin's Stop, and a launch that fails, return once everything the
	// plugin wrote has been handed to it, or after a second. Beyond 1 MiB
	// waiting for it, the plugin's output is dropped, and a line says how
	// much. A Write that panics is logged and not called again for that
	// plugin.
	Stderr io.Writer
	// StartTimeout bounds the wait for the address line. Zero means 10s.
	// The Conn's respawn timeout applies too.
	StartTimeout time.Duration
	// StopGrace is how long a stop waits for the plugin to exit after
	// SIGTERM before it SIGKILLs the group. Zero means 2s; negative means
	// SIGKILL at once.
	StopGrace time.Duration
	// AllowRemote accepts a TCP address that is not loopback and DNS
	// targets. The Conn's dial options (redial.WithDialOptions) must then
	// carry the credentials that the network calls for.
	AllowRemote bool
}

var _ Respawner = (*Command)(nil)

// socketDirEnv names the directory a plugin should put its socket in.
const socketDirEnv = "PLUGIN_UNIX_SOCKET_DIR"

// defaultStopGrace is StopGrace's default.
const defaultStopGrace = 2 * time.Second

// Respawn starts the binary and returns its address as the Target.
func (c *Command) Respawn(ctx context.Context, _ Request) (Backend, error) {
	if c == nil || c.Path == "" {
		return Backend{}, Permanent(errors.New("redial: Command has no Path"))
	}
	env := c.Env
	if env == nil {
		env = os.Environ()
	}
	dir, err := os.MkdirTemp(lookupEnv(env, socketDirEnv), "respawn-")
	if err != nil {
		return Backend{}, fmt.Errorf("redial: %s: socket dir: %w", c.Path, err)
	}
	cmd := exec.Command(c.Path, c.Args...)
	cmd.Env = append(env[:len(env):len(env)], socketDirEnv+"="+dir) // the last value wins
	tail := &Tail{}
	cmd.Dir = c.Dir
	// Stderr copying ends at most this long after the process exits, even
	// if a grandchild still holds the pipe.
	cmd.WaitDelay = time.Second
	stderr, host := teeStderr(tail, c.Stderr)
	st, err := startPlugin(cmd, stderr)
	if err != nil {
		_ = os.RemoveAll(dir)
		return Backend{}, ExecFailed(fmt.Errorf("redial: start %s: %w", c.Path, err))
	}
	g := st.g
	g.proc.KeepStderr(tail)
	p := &plugin{g: g, stdout: st.stdout, lines: st.lines, host: host, dir: dir, grace: c.StopGrace}
	if p.grace == 0 {
		p.grace = defaultStopGrace
	}
	b, err := c.handshake(ctx, p)
	if err != nil {
		// A plugin that printed its address and then exited (its socket
		// gone with it) is reported by its exit, not by the kill below.
		if !g.proc.Abandon() && errors.Is(err, errNoAddress) {
			err = errClosedStdout // the kill below is redial's: not how it ended
		}
		p.grace = -1 // a plugin that failed to start is killed at once
		_ = p.stop()
		e, _ := g.proc.Exit()
		serr := &startError{path: c.Path, err: err, exit: &ExitError{Exit: e, Stderr: tail.String()}}
		if errors.Is(err, errNoAddress) {
			return Backend{}, notAPlugin(e, tail.String(), serr)
		}
		return Backend{}, serr
	}
	return b, nil
}

// handshake reads the plugin's address line and checks what it names.
func (c *Command) handshake(ctx context.Context, p *plugin) (Backend, error) {
	timeout := c.StartTimeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	var r lineResult
	select {
	case r = <-p.lines:
	case <-timer.C:
		return Backend{}, fmt.Errorf("printed no address within %v", timeout)
	case <-ctx.Done():
		return Backend{}, fmt.Errorf("start abandoned: %w", ctx.Err())
	}
	switch {
	case r.err != nil:
		return Backend{}, fmt.Errorf("printed more than %d bytes without a newline: %s", MaxAddressLine, quote(r.line))
	case r.line == "": // stdout closed: the plugin exited, or closed it
		return Backend{}, errNoAddress
	}
	a, err := parseAddress(r.line)
	if err != nil {
		// It speaks no protocol redial knows: launching it again will not
		// change what it prints.
		return Backend{}, Permanent(err)
	}
	if a.sock != "" {
		if err := p.checkSocket(a.sock, c.Dir); err != nil {
			return Backend{}, err
		}
		if p.sock != a.sock {
			a.target = "unix://" + p.sock
		}
	} else if !c.AllowRemote && !isLoopback(a.host) {
		return Backend{}, fmt.Errorf("printed %s: %s is not a loopback address; set Command.AllowRemote (and the credentials it needs) to dial it", quote(a.target), quote(a.host))
	}
	return Backend{Target: a.target, Process: p.g.proc, Stop: p.stop}, nil
}

// errNoAddress: the plugin closed its stdout, most likely exiting, before
// it printed its address. errClosedStdout: it did so and did not exit.
var (
	errNoAddress    = errors.New("exited before printing its address")
	errClosedStdout = errors.New("closed its stdout without printing an address, and kept running")
)

// lookupEnv returns the last value of key in env, "" if it has none.
func lookupEnv(env []string, key string) string {
	v := ""
	for _, kv := range env {
		if k, val, ok := cutEnv(kv); ok && k == key {
			v = val
		}
	}
	return v
}

func cutEnv(kv string) (key, val string, ok bool) {
	for i := 1; i < len(kv); i++ { // a leading '=' belongs to the key (Windows)
		if kv[i] == '=' {
			return kv[:i], kv[i+1:], true
		}
	}
	return "", "", false
}

// absSocket resolves the printed socket path: relative to dir, the
// plugin's working directory; with dir empty, a relative path is an error.
func absSocket(sock, dir string) (string, error) {
	if filepath.IsAbs(sock) {
		return filepath.Clean(sock), nil
	}
	if dir == "" {
		return "", fmt.Errorf("printed the relative socket path %s: print an absolute path, or set Command.Dir", quote(sock))
	}
	return filepath.Abs(filepath.Join(dir, sock))
}
