//go:build unix

package command_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/grpc-respawn/respawn/internal/plugintest"
	"github.com/grpc-respawn/respawn/internal/respawntest"
	"github.com/grpc-respawn/respawn/internal/testpb"
	"github.com/grpc-respawn/respawn/redial"
	"github.com/grpc-respawn/respawn/redial/command"
	"github.com/grpc-respawn/respawn/redial/internal/proc"
)

// TestCommandDrainsAChattyPlugin: a plugin that writes 1 MiB to stdout and
// to stderr after its address, more than a pipe holds, must still come to
// serve (both pipes are drained), and once it is killed the end of its
// stderr must be in its tail when its exit is reported (the pipe is read
// to the end before the exit is).
func TestCommandDrainsAChattyPlugin(t *testing.T) {
	cmd := &command.Hook{Path: plugintest.BuildOnce(t), Args: []string{"-chatter", "1048576"}}
	b, err := cmd.Respawn(respawntest.Context(t, 20*time.Second), redial.Request{Generation: 1})
	if err != nil {
		t.Fatalf("Respawn: %v", err)
	}
	defer func() { _ = b.Stop() }()
	respawntest.WantServedBy(t, b.Target, b.Process.PID)
	if err := syscall.Kill(b.Process.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	respawntest.WaitDone(t, b.Process.Done(), "plugin reaped")
	if tail := proc.Of(b.Process).Stderr(); !strings.HasSuffix(tail, "chatter done") {
		t.Errorf("stderr tail at the exit ends with %q, want \"chatter done\"", tail[max(0, len(tail)-40):])
	}
}

// TestCommandKeepsTheLastWordsOfAPlugin: a plugin that writes 1 MiB to
// stderr and exits right after its last line must have that line at the
// end of the stderr its launch error quotes: whatever is still in the pipe
// when the exit is seen is read before the exit is reported.
func TestCommandKeepsTheLastWordsOfAPlugin(t *testing.T) {
	cmd := &command.Hook{Path: plugintest.BuildOnce(t), Args: []string{"-chatter", "1048576", "-exit-after-start"}}
	b, err := cmd.Respawn(respawntest.Context(t, 20*time.Second), redial.Request{Generation: 1})
	var tail string
	var ee *proc.ExitError
	switch {
	case err == nil: // it printed its address before its socket went
		defer func() { _ = b.Stop() }()
		respawntest.WaitDone(t, b.Process.Done(), "plugin reaped")
		tail = proc.Of(b.Process).Stderr()
	case errors.As(err, &ee):
		tail = ee.Stderr
	default:
		t.Fatalf("Respawn: %v, want a plugin or a *proc.ExitError", err)
	}
	if !strings.HasSuffix(tail, "chatter done") {
		t.Errorf("stderr tail at the exit ends with %q, want \"chatter done\"", tail[max(0, len(tail)-40):])
	}
}

// blockedWriter is a Hook.Stderr whose Write blocks until release is
// closed, as a log shipper that has stopped reading does.
type blockedWriter struct {
	entered chan struct{} // gets a value when a Write starts
	release chan struct{}
	dropped chan string // gets the line that says output was dropped
}

func (w *blockedWriter) Write(p []byte) (int, error) {
	select {
	case w.entered <- struct{}{}:
	default:
	}
	<-w.release
	if s := string(p); strings.Contains(s, "dropped") {
		select {
		case w.dropped <- s:
		default:
		}
	}
	return len(p), nil
}

// TestCommandStderrWriterThatBlocks: a host's Stderr writer that blocks
// does not delay the sight of the plugin's exit, nor its tail; what the
// writer could not take in time is dropped and said to it.
func TestCommandStderrWriterThatBlocks(t *testing.T) {
	w := &blockedWriter{entered: make(chan struct{}, 1), release: make(chan struct{}), dropped: make(chan string, 1)}
	cmd := &command.Hook{Path: plugintest.BuildOnce(t), Args: []string{"-chatter", "2097152"}, Stderr: w}
	b, err := cmd.Respawn(respawntest.Context(t, 20*time.Second), redial.Request{Generation: 1})
	if err != nil {
		close(w.release)
		t.Fatalf("Respawn: %v", err)
	}
	defer func() { _ = b.Stop() }()
	release := sync.OnceFunc(func() { close(w.release) })
	defer release() // before Stop, if the test fails
	respawntest.WaitDone(t, w.entered, "the writer's first Write")
	respawntest.WantServedBy(t, b.Target, b.Process.PID)
	if err := syscall.Kill(b.Process.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	respawntest.WaitDone(t, b.Process.Done(), "plugin reaped while its Stderr writer is blocked")
	if tail := proc.Of(b.Process).Stderr(); !strings.HasSuffix(tail, "chatter done") {
		t.Errorf("stderr tail at the exit ends with %q, want \"chatter done\"", tail[max(0, len(tail)-40):])
	}
	release()
	select {
	case line := <-w.dropped:
		t.Logf("the writer was told: %s", strings.TrimSpace(line))
	case <-time.After(20 * time.Second):
		t.Fatal("the writer was never told of the dropped output")
	}
}

// slowWriter is a Hook.Stderr that takes its time, and keeps what it got.
type slowWriter struct {
	mu  sync.Mutex
	got strings.Builder
}

func (w *slowWriter) Write(p []byte) (int, error) {
	time.Sleep(30 * time.Millisecond) // a slow log shipper
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.got.Write(p)
}

func (w *slowWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.got.String()
}

// TestCommandStderrCompleteAtFailure: when a launch fails, what the plugin
// wrote to stderr has reached the host's slow Stderr writer by the time
// Respawn returns, as it had with os/exec's copy.
func TestCommandStderrCompleteAtFailure(t *testing.T) {
	w := &slowWriter{}
	cmd := &command.Hook{Path: plugintest.BuildOnce(t), Args: []string{"-exit-code", "7"}, Stderr: w}
	_, err := cmd.Respawn(respawntest.Context(t, 20*time.Second), redial.Request{Generation: 1})
	var ee *proc.ExitError
	if !errors.As(err, &ee) || ee.Exit.Code != 7 {
		t.Fatalf("Respawn: %v, want the exit with code 7", err)
	}
	if got := w.String(); !strings.Contains(got, "exiting with code 7") {
		t.Errorf("the host's Stderr got %q when Respawn returned, want the plugin's last line", got)
	}
}

// TestZeroProcess: a hook that reports a zero Process (no exit to wait
// for) gets a working Conn, not a crash.
func TestZeroProcess(t *testing.T) {
	cmd := &command.Hook{Path: plugintest.BuildOnce(t)}
	hook := respawntest.RespawnerFunc(func(ctx context.Context, req redial.Request) (redial.Backend, error) {
		b, err := cmd.Respawn(ctx, req)
		b.Process = &redial.Process{}
		return b, err
	})
	rc := respawntest.NewConn(t, hook)
	if err := rc.Connect(respawntest.Context(t, 20*time.Second)); err != nil {
		t.Fatalf("Connect: %v", err)
	}
	if _, err := testpb.NewTestClient(rc).Get(respawntest.Context(t, 10*time.Second), &testpb.GetRequest{}); err != nil {
		t.Fatalf("Get: %v", err)
	}
}

// lateWriter is a Hook.Stderr whose first Write blocks until release
// is closed, and that counts the Writes that begin once closed is set.
type lateWriter struct {
	entered, release chan struct{}
	first            sync.Once
	closed           atomic.Bool
	late             atomic.Int32
}

func (w *lateWriter) Write(p []byte) (int, error) {
	if w.closed.Load() {
		w.late.Add(1)
	}
	w.first.Do(func() {
		close(w.entered)
		<-w.release
	})
	return len(p), nil
}

// TestCommandStderrNotWrittenAfterClose: once Close has returned, the
// host's Stderr writer is not called again, even though a Write blocked
// through the stop and the plugin's last line ("stopping") still waited to
// be written: a host may close its log right after Close. Before, the
// writer was called again after Close returned.
func TestCommandStderrNotWrittenAfterClose(t *testing.T) {
	before := goleak.IgnoreCurrent()
	w := &lateWriter{entered: make(chan struct{}), release: make(chan struct{})}
	release := sync.OnceFunc(func() { close(w.release) })
	defer release()
	rc, err := redial.New(&command.Hook{Path: plugintest.BuildOnce(t), Args: []string{"-chatter", "100"}, Stderr: w})
	if err != nil {
		t.Fatal(err)
	}
	if err := rc.Connect(respawntest.Context(t, 20*time.Second)); err != nil {
		t.Fatal(err)
	}
	respawntest.WaitDone(t, w.entered, "the writer's first Write")
	if err := rc.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	w.closed.Store(true)
	release()
	// Wait until redial's goroutines, the writer's included, have ended:
	// then every Write that was going to be made has been.
	goleak.VerifyNone(t, before)
	if n := w.late.Load(); n != 0 {
		t.Errorf("the Stderr writer was called %d times after Close returned, want 0", n)
	}
}
