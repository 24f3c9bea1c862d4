// Package command is the exec hook: a [redial.Respawner] that execs a
// plugin binary which prints the address it serves on as the first line of
// its stdout, supervises its process (a process group of its own, its
// exit reported as it happens, its stderr's tail quoted in launch errors)
// and stops it gracefully.
//
//	conn, err := respawn.New(&command.Hook{Path: "/usr/libexec/objectstore-plugin"})
package command

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/grpc-respawn/respawn/redial"
	"github.com/grpc-respawn/respawn/redial/internal/proc"
)

// Hook is a [redial.Respawner] that execs a plugin binary which prints the
// address it serves on as the first line of its stdout, either as a gRPC
// target ("unix:///tmp/p-1/plugin.sock", "127.0.0.1:7000") or as a
// hashicorp/go-plugin handshake line ("1|1|unix|/tmp/plugin42|grpc").
// The line may be at most 64 KiB long, newline included.
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
// all. The plugin runs in a process group of its own: its children are
// killed with it, and the group is only signalled while the plugin is
// known not to be reaped (exactly, on Linux: whatever is left of its group
// is killed while the plugin is a zombie, so its children never outlive
// it; elsewhere the reaper stops signalling just before it reaps). Then
// Stop removes the private directory, with what the plugin left in it (its
// socket), if it is still the directory the Hook made; it follows no symlink in it. Nothing else: a
// socket the plugin printed elsewhere (a fixed path, a shared daemon's,
// another plugin's) is left where it is, as the Hook cannot tell who made
// it; a plugin that binds a fixed path removes its socket when it exits
// (a net.UnixListener does on Close) or unlinks a stale one before binding.
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
// processes it started (a job object).
//
// A plugin dies with its host on Linux and Windows, even when the host is
// killed without stopping it (SIGKILL, the OOM killer, a timeout): on
// Linux the plugin gets SysProcAttr.Pdeathsig SIGKILL, forked from an OS
// thread kept while any plugin it started runs; on Windows its job object
// is closed with the host. Elsewhere it outlives it.
// A child that the plugin moved out of its process group (setpgid,
// setsid) is no longer its group's: neither Stop nor the host's death
// reaches it.
//
// The fields must not change once the Hook is in use; its methods are
// safe for concurrent use.
type Hook struct {
	Path string   // the binary; required
	Args []string // arguments, not including the binary
	Env  []string // the environment; nil means the host's
	Dir  string   // the working directory; empty means the host's
	// Stderr receives the plugin's stderr; nil discards it. Its Write is
	// called on a goroutine of the Hook's, never on the one that reaps the
	// plugin: a Write that blocks or is slow does not delay the sight of
	// the plugin's exit. It is called one call at a time per plugin, but
	// concurrently for the plugins of one Hook (a plugin, its spares, a
	// retiring one): it must be safe for concurrent use, as os.Stderr is.
	// A plugin's Stop, and a launch that fails, return once everything the
	// plugin wrote has been handed to it, or after a second; then Write is
	// not called again for that plugin (so not after Conn.Close returns):
	// what is left, or written later by a child that outlived the plugin,
	// is dropped. Only a Write that is still running a second after the
	// plugin exited may return after Stop. Beyond 1 MiB waiting for it,
	// the plugin's output is dropped, and a line says how much. A Write
	// that panics is logged and not called again for that plugin.
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

var _ redial.Respawner = (*Hook)(nil)

// socketDirEnv names the directory a plugin should put its socket in.
const socketDirEnv = "PLUGIN_UNIX_SOCKET_DIR"

// defaultStopGrace is StopGrace's default.
const defaultStopGrace = 2 * time.Second

// Respawn starts the binary and returns its address as the Target. It
// implements redial.Respawner; redial calls it, a host does not.
func (c *Hook) Respawn(ctx context.Context, req redial.Request) (redial.Backend, error) {
	if c == nil || c.Path == "" {
		return redial.Backend{}, redial.Permanent(errors.New("command: Hook has no Path"))
	}
	env := c.Env
	if env == nil {
		env = os.Environ()
	}
	dir, err := os.MkdirTemp(lookupEnv(env, socketDirEnv), "respawn-")
	if err != nil {
		return redial.Backend{}, fmt.Errorf("command: %s: socket dir: %w", c.Path, err)
	}
	dirID, err := os.Lstat(dir)
	if err != nil {
		_ = os.Remove(dir)
		return redial.Backend{}, fmt.Errorf("command: %s: socket dir: %w", c.Path, err)
	}
	cmd := exec.Command(c.Path, c.Args...)
	// The last value wins: the socket dir, then what redial needs set.
	cmd.Env = append(append(env[:len(env):len(env)], socketDirEnv+"="+dir), req.Env...)
	tail := &proc.Tail{}
	cmd.Dir = c.Dir
	stderr, host := teeStderr(tail, c.Stderr)
	st, err := proc.StartReading(cmd, maxAddressLine, stderr)
	if err != nil {
		_ = os.RemoveAll(dir)
		return redial.Backend{}, execFailed(fmt.Errorf("command: start %s: %w", c.Path, err))
	}
	pr := st.Proc
	pr.KeepStderr(tail)
	p := &plugin{proc: pr, stdout: st.Stdout, lines: st.Lines, host: host, dir: dir, dirID: dirID, grace: c.StopGrace}
	if p.grace == 0 {
		p.grace = defaultStopGrace
	}
	b, err := c.handshake(ctx, p)
	if err != nil {
		// A plugin that printed its address and then exited (its socket
		// gone with it) is reported by its exit, not by the kill below.
		if !pr.Abandon() && errors.Is(err, errNoAddress) {
			err = errClosedStdout // the kill below is the Hook's: not how it ended
		}
		p.grace = -1 // a plugin that failed to start is killed at once
		_ = p.stop()
		serr := &startError{path: c.Path, err: err, exit: proc.ExitErrorOf(pr)}
		if errors.Is(err, errNoAddress) {
			return redial.Backend{}, notAPlugin(serr.exit.Exit, serr.exit.Stderr, serr)
		}
		return redial.Backend{}, serr
	}
	return b, nil
}

// handshake reads the plugin's address line and checks what it names.
func (c *Hook) handshake(ctx context.Context, p *plugin) (redial.Backend, error) {
	timeout := c.StartTimeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	var r proc.Line
	select {
	case r = <-p.lines:
	case <-timer.C:
		return redial.Backend{}, fmt.Errorf("printed no address within %v", timeout)
	case <-ctx.Done():
		return redial.Backend{}, fmt.Errorf("start abandoned: %w", ctx.Err())
	}
	switch {
	case r.Err != nil:
		return redial.Backend{}, fmt.Errorf("printed more than %d bytes without a newline: %s", maxAddressLine, quote(r.Text))
	case r.Text == "": // stdout closed: the plugin exited, or closed it
		return redial.Backend{}, errNoAddress
	}
	a, err := parseAddress(r.Text)
	if err != nil {
		// It speaks no protocol the Hook knows: launching it again will
		// not change what it prints.
		return redial.Backend{}, redial.Permanent(err)
	}
	if a.sock != "" {
		if err := p.checkSocket(a.sock, c.Dir); err != nil {
			return redial.Backend{}, err
		}
		if p.sock != a.sock {
			a.target = "unix://" + p.sock
		}
	} else if !c.AllowRemote && !isLoopback(a.host) {
		return redial.Backend{}, fmt.Errorf("printed %s: %s is not a loopback address; set Hook.AllowRemote (and the credentials it needs) to dial it", quote(a.target), quote(a.host))
	}
	return redial.Backend{Target: a.target, Process: proc.Public(p.proc).(*redial.Process), Stop: p.stop}, nil
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
		return "", fmt.Errorf("printed the relative socket path %s: print an absolute path, or set Hook.Dir", quote(sock))
	}
	return filepath.Abs(filepath.Join(dir, sock))
}
