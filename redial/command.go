package redial

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Command is a [Respawner] that execs a plugin binary which prints the
// address it serves on as the first line of its stdout, either as a gRPC
// target ("unix:///tmp/p-1/plugin.sock", "127.0.0.1:7000") or as a
// hashicorp/go-plugin handshake line ("1|1|unix|/tmp/plugin42|grpc").
//
// Each plugin runs in its own process group. When redial retires it, the
// whole group is killed with SIGKILL, the process is reaped (no zombies), and
// a unix socket it printed is removed, with its directory if that is then
// empty. A plugin that exits, prints something else, or prints nothing
// within StartTimeout is killed and the respawn fails with an error that
// quotes what it printed.
//
// The fields must not change once the Command is in use; its methods are
// safe for concurrent use.
type Command struct {
	Path string   // the binary; required
	Args []string // arguments, not including the binary
	Env  []string // the environment; nil means the host's
	Dir  string   // the working directory; empty means the host's
	// Stderr receives the plugin's stderr; nil discards it.
	Stderr io.Writer
	// StartTimeout bounds the wait for the address line. Zero means 10s.
	// The Conn's respawn timeout applies too.
	StartTimeout time.Duration
}

var _ Respawner = (*Command)(nil)

// Respawn starts the binary and returns its address as the Target.
func (c *Command) Respawn(ctx context.Context, _ Request) (Backend, error) {
	if c == nil || c.Path == "" {
		return Backend{}, Permanent(errors.New("redial: Command has no Path"))
	}
	cmd := exec.Command(c.Path, c.Args...)
	tail := &Tail{}
	cmd.Env, cmd.Dir, cmd.Stderr = c.Env, c.Dir, teeStderr(tail, c.Stderr)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// Stderr copying ends at most this long after the process exits, even
	// if a grandchild still holds the pipe.
	cmd.WaitDelay = time.Second
	// Our own pipe rather than StdoutPipe, so that reaping the process
	// (cmd.Wait) and draining its stdout do not wait on each other.
	stdout, w, err := os.Pipe()
	if err != nil {
		return Backend{}, fmt.Errorf("redial: %s: %w", c.Path, err)
	}
	cmd.Stdout = w
	err = cmd.Start()
	_ = w.Close()
	if err != nil {
		_ = stdout.Close()
		return Backend{}, startFailed(fmt.Errorf("redial: start %s: %w", c.Path, err))
	}
	pid := cmd.Process.Pid
	// The group outlives its leader while any child of the plugin runs, and
	// the kernel does not hand out a pid still in use as a group id, so a
	// late kill hits only the plugin's own processes. Once the group is
	// empty the id could in theory be reused, but redial stops a plugin as
	// soon as it has exited, long before pids wrap around.
	killGroup := func() error { return syscall.Kill(-pid, syscall.SIGKILL) }
	proc := NewProcess(pid, killGroup)
	proc.KeepStderr(tail)
	go func() {
		_ = cmd.Wait()
		proc.Report(ExitOf(pid, cmd.ProcessState))
	}()
	lines := make(chan string, 1)
	go func() {
		defer stdout.Close()
		r := bufio.NewReader(stdout)
		line, _ := r.ReadString('\n')
		lines <- line
		_, _ = io.Copy(io.Discard, r) // a plugin must never block on a full pipe
	}()
	reap := func() {
		_ = killGroup()
		<-proc.Done()
	}
	abort := func(format string, args ...any) (Backend, error) {
		proc.MarkStopping(ExitAbandoned)
		reap()
		e, _ := proc.Exit()
		return Backend{}, &startError{path: c.Path, err: fmt.Errorf(format, args...), exit: &ExitError{Exit: e, Stderr: tail.String()}}
	}

	timeout := c.StartTimeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	var line string
	select {
	case line = <-lines:
	case <-timer.C:
		return abort("printed no address within %v", timeout)
	case <-ctx.Done():
		return abort("start abandoned: %w", ctx.Err())
	}
	if line == "" { // stdout closed: the plugin exited, or closed it
		exitedOrKill(proc)
		reap()
		e, _ := proc.Exit()
		_, err := abort("exited before printing its address")
		return Backend{}, notAPlugin(e, tail.String(), err)
	}
	target, sock, err := parseAddress(line)
	if err != nil {
		// It speaks no protocol redial knows: launching it again will not
		// change what it prints.
		_, err = abort("%w", err)
		return Backend{}, Permanent(err)
	}
	if sock != "" && !filepath.IsAbs(sock) && c.Dir != "" {
		// Relative to the plugin's working directory, not the host's.
		sock = filepath.Join(c.Dir, sock)
		target = "unix://" + sock
	}
	stop := func() error {
		reap()
		if sock != "" {
			_ = os.Remove(sock)
			_ = os.Remove(filepath.Dir(sock)) // only if empty
		}
		return nil
	}
	return Backend{Target: target, Process: proc, Stop: stop}, nil
}

// parseAddress turns the plugin's first line into a gRPC target and, for a
// unix socket, its path.
func parseAddress(line string) (target, sock string, err error) {
	s := strings.TrimSpace(line)
	if parts := strings.Split(s, "|"); len(parts) >= 4 {
		// go-plugin handshake: CORE-VERSION|APP-VERSION|NETWORK|ADDR|PROTOCOL
		if len(parts) < 5 || parts[4] != "grpc" {
			return "", "", fmt.Errorf("printed %q: a go-plugin net/rpc plugin; only gRPC plugins can be respawned", s)
		}
		switch parts[2] {
		case "unix":
			return "unix://" + parts[3], parts[3], nil
		case "tcp":
			return parts[3], "", nil
		}
		return "", "", fmt.Errorf("printed %q: unknown network %q", s, parts[2])
	}
	switch {
	case strings.HasPrefix(s, "unix://"):
		u, perr := url.Parse(s)
		if perr != nil || u.Path == "" || u.Host != "" {
			break
		}
		return s, u.Path, nil
	case strings.HasPrefix(s, "unix:"):
		p := strings.TrimPrefix(s, "unix:")
		if p != "" {
			return s, p, nil
		}
	case strings.HasPrefix(s, "/"):
		return "unix://" + s, s, nil
	case strings.HasPrefix(s, "dns:///"), strings.HasPrefix(s, "passthrough:///"):
		return s, "", nil
	default:
		if host, port, err := net.SplitHostPort(s); err == nil && isPort(port) && !strings.ContainsAny(host, " \t/") {
			return s, "", nil
		}
	}
	if len(s) > 80 {
		s = s[:80] + "…"
	}
	return "", "", fmt.Errorf("printed %q, want a gRPC target such as unix:///tmp/plugin/plugin.sock", s)
}

func isPort(s string) bool {
	n, err := strconv.Atoi(s)
	return err == nil && n > 0 && n < 65536
}
