// Package plugintest builds and runs the testplugin binary as a real child
// process, for tests that need a plugin without going through the library's
// own launch hook.
package plugintest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Package is the import path of the plugin binary.
const Package = "github.com/grpc-respawn/respawn/internal/cmd/testplugin"

// StartTimeout bounds how long Launch waits for the address line.
const StartTimeout = 10 * time.Second

// Build compiles the testplugin binary into dir and returns its path. It
// must run inside the module (go test runs in the package directory, so
// tests are fine).
func Build(dir string) (string, error) {
	return BuildPackage(dir, Package)
}

// BuildPackage compiles the main package pkg of this module into dir and
// returns the binary's path.
func BuildPackage(dir, pkg string) (string, error) {
	gobin, err := goTool()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, filepath.Base(pkg))
	out, err := exec.Command(gobin, "build", "-o", bin, pkg).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build %s: %w\n%s", pkg, err, out)
	}
	return bin, nil
}

// goTool finds the go command: from PATH, as a developer would run it, else
// where the official installer puts it.
func goTool() (string, error) {
	if p, err := exec.LookPath("go"); err == nil {
		return p, nil
	}
	const fallback = "/usr/local/go/bin/go"
	if _, err := os.Stat(fallback); err != nil {
		return "", fmt.Errorf("go command neither in PATH nor at %s", fallback)
	}
	return fallback, nil
}

// builds caches BuildOncePackage's result per package path. The mutex
// guards only the map; each entry's Once serialises the build of its own
// package, so building one package does not hold up another.
var builds struct {
	mu sync.Mutex
	m  map[string]*build
}

type build struct {
	once sync.Once
	bin  string
	err  error
}

// BuildOnce builds the testplugin binary the first time it is called in a
// test binary and returns the cached path afterwards; see
// [BuildOncePackage].
func BuildOnce(tb testing.TB) string { tb.Helper(); return BuildOncePackage(tb, Package) }

// BuildOncePackage builds the main package pkg of this module the first time
// it is asked for in a test binary and returns the cached path afterwards; a
// failed build is cached too, and fails every caller. It is safe for
// concurrent use. The build dir is deliberately left behind: it must outlive
// any single test, and there is no hook for the end of the test binary
// outside TestMain.
func BuildOncePackage(tb testing.TB, pkg string) string {
	tb.Helper()
	builds.mu.Lock()
	if builds.m == nil {
		builds.m = make(map[string]*build)
	}
	b, ok := builds.m[pkg]
	if !ok {
		b = new(build)
		builds.m[pkg] = b
	}
	builds.mu.Unlock()
	b.once.Do(func() {
		dir, err := os.MkdirTemp("", "respawn-"+filepath.Base(pkg)+"-")
		if err != nil {
			b.err = err
			return
		}
		b.bin, b.err = BuildPackage(dir, pkg)
	})
	if b.err != nil {
		tb.Fatalf("build %s: %v", pkg, b.err)
	}
	return b.bin
}

// ReadJournal returns how many times Append ran for each id, according to
// the journal at path. A missing journal means no executions, not an error.
func ReadJournal(path string) (map[string]int, error) {
	counts := make(map[string]int)
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return counts, nil
	}
	if err != nil {
		return nil, err
	}
	for line := range strings.Lines(string(data)) {
		if id := strings.TrimSuffix(line, "\n"); id != "" {
			counts[id]++
		}
	}
	return counts, nil
}

// WaitJournal waits until done, given the counts [ReadJournal] returns for
// the journal at path, reports true; tests use it to know that calls are in
// the plugin's handler. It returns ctx's error, wrapped, if ctx ends first,
// and a read error at once. The journal is a file the plugin appends to, and
// nothing signals a write to a file, so there is no event to wait on: it
// polls the file every millisecond.
func WaitJournal(ctx context.Context, path string, done func(map[string]int) bool) error {
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for {
		j, err := ReadJournal(path)
		if err != nil {
			return err
		}
		if done(j) {
			return nil
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return fmt.Errorf("journal %s: %w", path, ctx.Err())
		}
	}
}

// Plugin is a running testplugin child process.
type Plugin struct {
	// Addr is the gRPC target the plugin printed, "unix:///abs/plugin.sock".
	Addr string
	// PID is the plugin's process id, also its process group id.
	PID int

	cmd     *exec.Cmd
	mu      sync.Mutex // held while the group is signalled, and to set reaped
	reaped  bool       // the plugin is reaped: its group id may be anyone's
	stdout  *os.File
	done    chan struct{} // closed once the process is reaped
	waitErr error         // cmd.Wait's result, valid after done

	closeOnce sync.Once
}

// Start launches bin with args like Launch, fails tb if it does not come up,
// and registers a cleanup that kills, reaps and removes the plugin.
func Start(tb testing.TB, bin string, args ...string) *Plugin {
	tb.Helper()
	p, err := Launch(bin, args...)
	if err != nil {
		tb.Fatalf("start plugin: %v", err)
	}
	tb.Cleanup(p.Close)
	return p
}

// Launch starts bin with args in its own process group and waits up to
// StartTimeout for its address line. The line must be "unix://" followed by
// an absolute path; anything else (a -garbage plugin) is an error. When
// the plugin exits first, the error wraps its *exec.ExitError. On error the
// process group is killed and reaped; on success the caller must call Close.
func Launch(bin string, args ...string) (*Plugin, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	// Passing *os.File (not a Writer) makes exec hand the fds to the child
	// directly, with no copying goroutines to leak.
	cmd.Stdout = w
	cmd.Stderr = os.Stderr
	// Own group, so Close can kill anything the plugin spawned, and a ^C
	// in the terminal does not reach it behind the test's back.
	ownGroup(cmd)
	err = cmd.Start()
	w.Close() // only the child may hold the write end: its exit means EOF
	if err != nil {
		r.Close()
		return nil, err
	}
	p := &Plugin{PID: cmd.Process.Pid, cmd: cmd, stdout: r, done: make(chan struct{})}
	go func() {
		werr := cmd.Wait()
		p.mu.Lock()
		p.reaped = true
		p.mu.Unlock()
		if ps := cmd.ProcessState; ps != nil && !ps.Success() {
			p.waitErr = &exec.ExitError{ProcessState: ps}
		} else if werr != nil && ps == nil {
			p.waitErr = werr
		}
		close(p.done)
	}()

	addr, err := p.readAddr()
	if err != nil {
		p.Close()
		return nil, err
	}
	p.Addr = addr
	return p, nil
}

// readAddr reads and checks the address line within StartTimeout.
func (p *Plugin) readAddr() (string, error) {
	deadline := time.Now().Add(StartTimeout)
	// Pipes from os.Pipe are pollable, so a read deadline works and no
	// reader goroutine is needed.
	if err := p.stdout.SetReadDeadline(deadline); err != nil {
		return "", err
	}
	line, err := bufio.NewReader(p.stdout).ReadString('\n')
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return "", fmt.Errorf("no address line within %v", StartTimeout)
	}
	if err != nil {
		// stdout closed: the plugin is most likely exiting; give it the
		// rest of the budget so the error can carry its exit status.
		select {
		case <-p.done:
			return "", fmt.Errorf("plugin exited before printing its address: %w", p.waitErr)
		case <-time.After(time.Until(deadline)):
			return "", fmt.Errorf("read address: %w", err)
		}
	}
	line = strings.TrimSuffix(line, "\n")
	path, ok := strings.CutPrefix(line, "unix://")
	if !ok || !filepath.IsAbs(path) {
		return "", fmt.Errorf("plugin printed %q, want unix://<absolute path>", line)
	}
	return line, nil
}

// Kill sends sig to the plugin process (not its group). After the plugin is
// reaped it returns os.ErrProcessDone rather than signalling a reused pid.
func (p *Plugin) Kill(sig syscall.Signal) error {
	return p.cmd.Process.Signal(sig)
}

// Wait blocks until the plugin is reaped and returns its exit error (nil
// for exit status 0). It is safe to call more than once and concurrently.
func (p *Plugin) Wait() error {
	<-p.done
	return p.waitErr
}

// Close SIGKILLs the plugin's process group, reaps the plugin and removes its
// socket dir (which a killed plugin cannot remove itself). It is idempotent.
func (p *Plugin) Close() {
	p.closeOnce.Do(func() {
		// The group is signalled only until the leader is reaped, so that
		// -PID names no stranger's group but in the instant between the
		// reaping and the flag, which a test host can afford.
		p.mu.Lock()
		if !p.reaped {
			killGroup(p.cmd.Process)
		}
		p.mu.Unlock()
		<-p.done
		p.stdout.Close()
		if dir := p.socketDir(); dir != "" {
			os.RemoveAll(dir)
		}
	})
}

// socketDir returns the plugin's private temp dir, or "" unless the address
// has the exact shape testplugin creates, so Close never removes anything
// else.
func (p *Plugin) socketDir() string {
	path, ok := strings.CutPrefix(p.Addr, "unix://")
	if !ok || filepath.Base(path) != "plugin.sock" {
		return ""
	}
	dir := filepath.Dir(path)
	if !strings.HasPrefix(filepath.Base(dir), "respawn-testplugin-") {
		return ""
	}
	return dir
}
