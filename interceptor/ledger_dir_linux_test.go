package interceptor_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/grpc-respawn/respawn/interceptor"
	"github.com/grpc-respawn/respawn/internal/ledgerwire"
	"github.com/grpc-respawn/respawn/internal/respawntest"
	"github.com/grpc-respawn/respawn/internal/testpb"
	"github.com/grpc-respawn/respawn/redial"
)

// ledgerPath returns the ledger file g's plugin was given, from its
// environment.
func ledgerPath(t *testing.T, g *redial.Generation) string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(g.Process().PID) + "/environ")
	if err != nil {
		t.Fatal(err)
	}
	for kv := range bytes.SplitSeq(b, []byte{0}) {
		if v, ok := bytes.CutPrefix(kv, []byte(ledgerwire.Env+"=")); ok {
			return string(v)
		}
	}
	t.Fatalf("plugin %d has no %s in its environment", g.Number(), ledgerwire.Env)
	return ""
}

// waitGone waits until path is gone, for at most 10s.
func waitGone(t *testing.T, path string) {
	t.Helper()
	waitGoneCtx(respawntest.Context(t, 10*time.Second), path)
	if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("%s still there after 10s (%v)", path, err)
	}
}

// TestLedgerFilesRemoved checks that a dead plugin's ledger file is removed
// once the call retried through it has ended, the live plugin's stays, and
// Close leaves nothing behind.
func TestLedgerFilesRemoved(t *testing.T) {
	h := newHost(t, []string{"-ledger-kill-at", "after-completed", "-ledger-kill-once", filepath.Join(t.TempDir(), "killed")}, nil, interceptor.WithLedger())
	first := h.rc.Current()
	deadFile := ledgerPath(t, first)
	dir := filepath.Dir(deadFile)
	if _, err := os.Lstat(deadFile); err != nil {
		t.Fatalf("the plugin's ledger: %v", err)
	}
	ctx := respawntest.Context(t, 20*time.Second)
	resp, err := h.client.Append(ctx, &testpb.AppendRequest{Id: "a1"})
	if err != nil {
		t.Fatalf("Append: %v", err)
	}
	if got, want := resp.GetPid(), int64(first.Process().PID); got != want {
		t.Fatalf("answered by pid %d; want the dead plugin's record, pid %d", got, want)
	}
	liveFile := ledgerPath(t, h.rc.Current())
	waitGone(t, deadFile)
	if st, err := os.Lstat(liveFile); err != nil || !st.Mode().IsRegular() {
		t.Errorf("the live plugin's ledger %s: %v; want a regular file", liveFile, err)
	}

	if err := h.rc.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := os.Lstat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("ledger directory after Close: %v; want it gone", err)
	}
}

// TestLedgerDeadFileReleased: once a retry has been answered from a dead
// plugin's ledger, the successor holds no descriptor of that file, so
// that the host's removal of it frees its disk space and the successor's
// memory.
func TestLedgerDeadFileReleased(t *testing.T) {
	h := newHost(t, []string{"-ledger-kill-at", "after-completed", "-ledger-kill-once", filepath.Join(t.TempDir(), "killed")}, nil, interceptor.WithLedger())
	deadFile := ledgerPath(t, h.rc.Current())
	resp, err := h.client.Append(respawntest.Context(t, 20*time.Second), &testpb.AppendRequest{Id: "a1"})
	if err != nil {
		t.Fatalf("Append: %v", err)
	}
	successor := h.rc.Current().Process().PID
	if resp.GetPid() == int64(successor) {
		t.Fatalf("answered by the successor, pid %d; want the dead plugin's record", successor)
	}
	waitGone(t, deadFile)
	fds := "/proc/" + strconv.Itoa(successor) + "/fd"
	entries, err := os.ReadDir(fds)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if target, err := os.Readlink(filepath.Join(fds, e.Name())); err == nil && strings.HasPrefix(target, deadFile) {
			t.Errorf("successor %d holds fd %s -> %q; want the dead plugin's ledger released", successor, e.Name(), target)
		}
	}
}

// TestLedgerDirRemoved removes the ledger directory under a serving plugin:
// its calls still run, once each; its successor, given a file in no
// directory, keeps no ledger, and a kill in a call then leaves the call's
// outcome unknown, as without ledgers. No call runs twice.
func TestLedgerDirRemoved(t *testing.T) {
	h := newHost(t, nil, nil, interceptor.WithLedger())
	if err := os.RemoveAll(filepath.Dir(ledgerPath(t, h.rc.Current()))); err != nil {
		t.Fatal(err)
	}
	ctx := respawntest.Context(t, 20*time.Second)
	for _, id := range []string{"r1", "r2", "r3"} {
		_, err := h.client.Append(ctx, &testpb.AppendRequest{Id: id})
		n := h.executions(t, id)
		t.Logf("Append %s after the removal: %v; ran %d times", id, err, n)
		if err != nil || n != 1 {
			t.Errorf("Append %s: %v, ran %d times; want it answered, run once", id, err, n)
		}
	}
	respawntest.Kill(t, h.rc.Current())
	h.events.WaitCurrent(t, h.rc, 2)
	if _, err := h.client.Append(ctx, &testpb.AppendRequest{Id: "a2"}); err != nil {
		t.Fatalf("Append on the successor: %v", err)
	}
	if got := h.executions(t, "a2"); got != 1 {
		t.Errorf("journal: a2 ran %d times; want 1", got)
	}
	err := h.killMidCall(t, "k1", func(ctx context.Context) error {
		_, err := h.client.Append(ctx, &testpb.AppendRequest{Id: "k1", DelayMs: 10_000})
		return err
	})
	wantNotIdempotent(t, err)
	if got := h.executions(t, "k1"); got != 1 {
		t.Errorf("journal: k1 ran %d times; want 1", got)
	}
}

// heldWait bounds how long a retry waits for its dead plugin's ledger to
// be removed, which it must not be while the retry can read it.
const heldWait = 2 * time.Second

// TestLedgerHeldWhileRetried holds back the retry of an Append that
// completed on a plugin killed before it could answer, until that
// plugin's ledger file is removed or heldWait has passed: the host must
// keep the file while a call that may be retried through it is in flight,
// so the retry still finds the record and the Append ran once.
func TestLedgerHeldWhileRetried(t *testing.T) {
	var deadFile atomic.Pointer[string]
	holdBack := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		md, _ := metadata.FromOutgoingContext(ctx)
		if path := deadFile.Load(); path != nil && len(md.Get(ledgerwire.RetryKey)) > 0 {
			wctx, cancel := context.WithTimeout(ctx, heldWait)
			waitGoneCtx(wctx, *path)
			cancel()
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	p := interceptor.New(interceptor.WithLedger())
	policy := respawntest.StartFunc(func(h redial.Handle) redial.Binding {
		b := p.Start(h)
		b.DialOptions = append(b.DialOptions, grpc.WithChainUnaryInterceptor(holdBack))
		return b
	})
	h := newHost(t, []string{"-ledger-kill-at", "after-completed", "-ledger-kill-once", filepath.Join(t.TempDir(), "killed")}, []redial.Option{withPolicy(policy)})
	first := h.rc.Current()
	path := ledgerPath(t, first)
	deadFile.Store(&path)

	resp, err := h.client.Append(respawntest.Context(t, 20*time.Second), &testpb.AppendRequest{Id: "a1"})
	if err != nil {
		t.Fatalf("Append: %v", err)
	}
	if got, want := resp.GetPid(), int64(first.Process().PID); got != want {
		t.Errorf("answered by pid %d; want the dead plugin's record, pid %d", got, want)
	}
	if got := h.executions(t, "a1"); got != 1 {
		t.Errorf("journal: a1 ran %d times; want 1", got)
	}
	waitGone(t, path)
}

// waitGoneCtx waits until path is gone or ctx's deadline passes, woken by
// inotify on each removal in path's directory.
func waitGoneCtx(ctx context.Context, path string) {
	fd, err := syscall.InotifyInit1(syscall.IN_CLOEXEC | syscall.IN_NONBLOCK)
	if err != nil {
		return
	}
	events := os.NewFile(uintptr(fd), "inotify") // non-blocking: read waits in the poller
	defer events.Close()
	if _, err := syscall.InotifyAddWatch(fd, filepath.Dir(path), syscall.IN_DELETE|syscall.IN_DELETE_SELF); err != nil {
		return
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = events.SetReadDeadline(dl)
	}
	buf := make([]byte, 4096)
	for {
		// Watched before this look, so that no removal goes unseen.
		if _, err := os.Lstat(path); errors.Is(err, os.ErrNotExist) {
			return
		}
		if _, err := events.Read(buf); err != nil {
			return // the deadline, or the directory gone
		}
	}
}

// TestLedgerRecycledWithoutItsDirectory: with the ledger directory removed
// under a serving plugin (a cleaner of the temporary directory), the
// plugin's ledger, which it goes on writing, still counts against
// Recycle.Ledger, and the plugin is replaced once it outgrows it.
func TestLedgerRecycledWithoutItsDirectory(t *testing.T) {
	pacing := redial.WithPacing(redial.Pacing{Recycle: redial.Recycle{Ledger: 64 << 10, Check: 10 * time.Millisecond}})
	h := newHost(t, nil, []redial.Option{pacing}, interceptor.WithLedger())
	if err := os.RemoveAll(filepath.Dir(ledgerPath(t, h.rc.Current()))); err != nil {
		t.Fatal(err)
	}
	ctx := respawntest.Context(t, 20*time.Second)
	for i := 0; h.events.CountFor(respawntest.Rotated) == 0; i++ {
		if i == 1000 {
			t.Fatal("no rotation after 1000 Appends of a plugin whose ledger may hold 64 KiB")
		}
		id := fmt.Sprintf("a%d", i)
		if _, err := h.client.Append(ctx, &testpb.AppendRequest{Id: id}); err != nil {
			t.Fatalf("Append %s: %v", id, err)
		}
	}
	start := h.events.WaitFor(t, "the rotation's start", respawntest.PlannedStart, 1)
	if start.Err == nil || !strings.Contains(start.Err.Error(), "ledger") {
		t.Errorf("the rotation's cause is %v, want the ledger rule", start.Err)
	}
}

// TestLedgerOpenedThenExec: a plugin that opens its ledger and then execs
// another program in its process (itself, here), which serves without
// the ledger, is not taken for a plugin that keeps one (the host sees in
// /proc that the process no longer holds the file): an Append killed
// in its handler fails as an outcome unknown, and runs once.
func TestLedgerOpenedThenExec(t *testing.T) {
	h := newHost(t, []string{"-ledger-exec-after-open", "-ledger-kill-at", "handler", "-ledger-kill-once", filepath.Join(t.TempDir(), "killed")}, nil, interceptor.WithLedger())
	_, err := h.client.Append(respawntest.Context(t, 20*time.Second), &testpb.AppendRequest{Id: "a1"})
	if got := h.executions(t, "a1"); got != 1 {
		t.Errorf("journal: a1 ran %d times; want 1", got)
	}
	wantNotIdempotent(t, err)
}
