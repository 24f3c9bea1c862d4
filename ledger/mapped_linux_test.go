package ledger

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grpc-respawn/respawn/internal/ledgerwire"
)

// cannotPreallocate makes the ledgers the test opens meet a file system
// that cannot preallocate: they write their records with write(2).
func cannotPreallocate(t *testing.T) { failPreallocate(t, syscall.EOPNOTSUPP) }

// failPreallocate makes fallocate(2) fail with errno until the test ends,
// when preallocate is given back the function it had.
func failPreallocate(t *testing.T, errno syscall.Errno) {
	t.Helper()
	fallocate := preallocate
	t.Cleanup(func() { preallocate = fallocate })
	preallocate = func(int, uint32, int64, int64) error { return errno }
}

const testMethod = "/x.Svc/Append"

func okHandler(ran *int) func(context.Context, any) (any, error) {
	return func(context.Context, any) (any, error) { *ran++; return nil, nil }
}

// lookupIn looks id up in the ledger file 1.ledger in dir, as a
// successor's retry does.
func lookupIn(t *testing.T, dir, id string) found {
	t.Helper()
	x := &index{dir: dir}
	defer x.close()
	f, err := x.lookup(key{id, testMethod}, []string{"1.ledger"})
	if err != nil {
		t.Fatalf("lookup of %s: %v", id, err)
	}
	return f
}

// TestMappedTailReadAsEnd: the file runs past its records, preallocated
// and zero-filled; its readers (a successor's lookup, parse, the host's
// check of its opened record) read the records, and the zeros as their
// end.
func TestMappedTailReadAsEnd(t *testing.T) {
	l, dir, path := openTestLedger(t)
	if l.m == nil {
		t.Fatal("the ledger is written with write(2); want it mapped")
	}
	data := runOnceAndRead(t, l, path)
	if len(data) != ledgerwire.Chunk || l.m.size >= len(data) {
		t.Fatalf("file of %d bytes, records %d; want %d, preallocated past them", len(data), l.m.size, ledgerwire.Chunk)
	}
	var kinds []byte
	if end := parse(data, func(v view, _, _ int) { kinds = append(kinds, v.kind) }); end != l.m.size {
		t.Errorf("parse took %d bytes, want the records' %d", end, l.m.size)
	}
	if want := []byte{kindOpened, kindStarted, kindCompleted}; string(kinds) != string(want) {
		t.Errorf("records parsed: kinds %v, want %v", kinds, want)
	}
	if !ledgerwire.Opened(data[:ledgerwire.MaxOpened], "testkey", os.Getpid()) {
		t.Error("the host's check does not find the opened record")
	}
	if f := lookupIn(t, dir, "aaaaaaaaaaaaaaaaaaaaaaaa"); f.completed == nil {
		t.Errorf("successor's lookup = %+v; want the call completed", f)
	}
}

// fillChunk records started records in l until the next one of the same
// length would not fit in the file's preallocated chunk.
func fillChunk(t *testing.T, l *ledger) {
	t.Helper()
	filler := appendStarted(nil, "ffffffffffffffffffffffff", testMethod)
	for len(l.m.data)-l.m.size >= len(filler) {
		if err := l.write(filler); err != nil {
			t.Fatal(err)
		}
	}
}

// TestGrowthFailsAsWrite: a file that cannot grow (here past RLIMIT_FSIZE,
// as on a full disk) fails the call whose started record needs the room,
// unrun, with the error that write(2) meets on a file system that cannot
// preallocate; once there is room again, the calls are recorded and read
// by a successor.
func TestGrowthFailsAsWrite(t *testing.T) {
	signal.Ignore(syscall.SIGXFSZ) // fallocate and write fail with EFBIG instead
	failed := func(t *testing.T, mapped bool) error {
		dir := privateTempDir(t)
		l, err := openMade(t, filepath.Join(dir, "1.ledger"), Config{}.normalise())
		if err != nil {
			t.Fatal(err)
		}
		defer l.close()
		if (l.m != nil) != mapped {
			t.Fatalf("ledger mapped: %v, want %v", l.m != nil, mapped)
		}
		if mapped {
			fillChunk(t, l)
		}
		fi, err := l.f.Stat()
		if err != nil {
			t.Fatal(err)
		}
		ran := 0
		err = withFileSizeLimit(t, fi.Size(), func() error {
			_, err := l.run(context.Background(), testMethod, "bbbbbbbbbbbbbbbbbbbbbbbb", nil, okHandler(&ran))
			return err
		})
		if err == nil || ran != 0 {
			t.Fatalf("a call whose started record found no room: %v, handler ran %d times; want an error, unrun", err, ran)
		}
		if _, err := l.run(context.Background(), testMethod, "cccccccccccccccccccccccc", nil, okHandler(&ran)); err != nil {
			t.Fatalf("a call once there is room: %v", err)
		}
		if f := lookupIn(t, dir, "cccccccccccccccccccccccc"); f.completed == nil {
			t.Errorf("successor's lookup of the call recorded after the failure = %+v; want it completed", f)
		}
		if f := lookupIn(t, dir, "bbbbbbbbbbbbbbbbbbbbbbbb"); f.completed != nil || f.started {
			t.Errorf("successor's lookup of the call that failed = %+v; want it unknown", f)
		}
		return err
	}
	var mappedErr, writeErr error
	t.Run("mapped", func(t *testing.T) { mappedErr = failed(t, true) })
	t.Run("write", func(t *testing.T) { cannotPreallocate(t); writeErr = failed(t, false) })
	for _, err := range []error{mappedErr, writeErr} {
		if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), syscall.EFBIG.Error()) {
			t.Errorf("failed call: %v; want Unavailable, %v", err, syscall.EFBIG)
		}
	}
}

// withFileSizeLimit runs f with RLIMIT_FSIZE at n bytes.
func withFileSizeLimit(t *testing.T, n int64, f func() error) error {
	t.Helper()
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &old); err != nil {
		t.Fatal(err)
	}
	lim := old
	lim.Cur = uint64(n)
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &lim); err != nil {
		t.Fatal(err)
	}
	err := f()
	if rerr := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &old); rerr != nil {
		t.Fatal(rerr)
	}
	return err
}

// TestGrowthNoSpace: a full disk at growth (ENOSPC from fallocate) fails
// the call unrun, as a write(2) that meets it does, and the ledger goes on
// once there is room.
func TestGrowthNoSpace(t *testing.T) {
	dir := privateTempDir(t)
	l, err := openMade(t, filepath.Join(dir, "1.ledger"), Config{}.normalise())
	if err != nil {
		t.Fatal(err)
	}
	defer l.close()
	fillChunk(t, l)
	fallocate := preallocate
	failPreallocate(t, syscall.ENOSPC)
	ran := 0
	_, err = l.run(context.Background(), testMethod, "bbbbbbbbbbbbbbbbbbbbbbbb", nil, okHandler(&ran))
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), syscall.ENOSPC.Error()) || ran != 0 {
		t.Fatalf("a call whose started record found the disk full: %v, handler ran %d times; want Unavailable, %v, unrun", err, ran, syscall.ENOSPC)
	}
	preallocate = fallocate
	if _, err := l.run(context.Background(), testMethod, "cccccccccccccccccccccccc", nil, okHandler(&ran)); err != nil || ran != 1 {
		t.Fatalf("a call once there is room: %v, handler ran %d times; want it run once", err, ran)
	}
}

// TestMappedFileCutShort: a ledger file cut short under the plugin's
// mapping by another process (which respawn's host never does) fails the
// calls that follow, unrun, and does not crash the plugin (SIGBUS).
func TestMappedFileCutShort(t *testing.T) {
	l, _, path := openTestLedger(t)
	if err := os.Truncate(path, 0); err != nil {
		t.Fatal(err)
	}
	ran := 0
	for i := range 2 {
		_, err := l.run(context.Background(), testMethod, fmt.Sprintf("%024d", i), nil, okHandler(&ran))
		if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "cut short") {
			t.Errorf("call %d after the file was cut short: %v; want Unavailable, cut short", i, err)
		}
	}
	if ran != 0 {
		t.Errorf("handler ran %d times; want none", ran)
	}
}

// growEnv, in the environment of this test binary, makes
// TestGrowthThenKill the plugin process that records calls in the ledger
// file it names until the file grows, and then SIGKILLs itself.
const growEnv = "LEDGER_TEST_GROW_THEN_DIE"

// TestGrowthThenKill: a plugin process SIGKILLed right after its file grew
// past a chunk, with a record across the chunks' boundary, leaves every
// call it recorded completed, for its successor to read.
func TestGrowthThenKill(t *testing.T) {
	if path := os.Getenv(growEnv); path != "" {
		growThenDie(path)
		return
	}
	dir := privateTempDir(t)
	path := filepath.Join(dir, "1.ledger")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestGrowthThenKill$")
	cmd.Env = append(os.Environ(), growEnv+"="+path)
	out, err := cmd.Output()
	ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("plugin process ended with %v, want killed by SIGKILL; output %q", err, out)
	}
	calls, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil || calls < 2 {
		t.Fatalf("plugin process said %q; want the number of calls it recorded", out)
	}
	data, err := os.ReadFile(path)
	if err != nil || len(data) != 2*ledgerwire.Chunk {
		t.Fatalf("file after the kill: %d bytes (%v); want %d, grown once", len(data), err, 2*ledgerwire.Chunk)
	}
	across := false
	parse(data, func(_ view, off, n int) {
		across = across || off < ledgerwire.Chunk && off+headerSize+n > ledgerwire.Chunk
	})
	if !across {
		t.Error("no record across the chunks' boundary")
	}
	for i := range calls {
		if f := lookupIn(t, dir, fmt.Sprintf("%024d", i)); f.completed == nil {
			t.Fatalf("successor's lookup of call %d of %d = %+v; want it completed", i, calls, f)
		}
	}
	if f := lookupIn(t, dir, fmt.Sprintf("%024d", calls)); f.completed != nil || f.started {
		t.Errorf("successor's lookup of a call never made = %+v; want it unknown", f)
	}
}

// growThenDie is the plugin process of TestGrowthThenKill: it records
// calls in the ledger at path until a record crosses into a new chunk,
// prints how many it made, and SIGKILLs itself.
func growThenDie(path string) {
	l, err := open(path, "testkey", Config{}.normalise())
	if err != nil || l.m == nil {
		fmt.Fprintln(os.Stderr, "open:", err, "mapped:", err == nil && l.m != nil)
		os.Exit(2)
	}
	ran := 0
	calls := 0
	for len(l.m.data) == ledgerwire.Chunk {
		if _, err := l.run(context.Background(), testMethod, fmt.Sprintf("%024d", calls), nil, okHandler(&ran)); err != nil {
			fmt.Fprintln(os.Stderr, "run:", err)
			os.Exit(2)
		}
		calls++
	}
	fmt.Println(calls)
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {}
}

// TestCannotMapWritesFromStart: a file system that cannot map the file
// shared and writable (mmap(2) fails: ENODEV where it maps no file,
// EINVAL where it maps files read-only, ENOMEM at the process's
// address-space limit) has the records written with write(2) from the
// file's start: the host finds the opened record first, and a successor
// the calls.
func TestCannotMapWritesFromStart(t *testing.T) {
	for _, errno := range []syscall.Errno{syscall.ENODEV, syscall.EINVAL, syscall.ENOMEM} {
		t.Run(errno.Error(), func(t *testing.T) {
			mmap := mapShared
			t.Cleanup(func() { mapShared = mmap })
			mapShared = func(int, int64, int, int, int) ([]byte, error) { return nil, errno }
			writesFromStart(t)
		})
	}
}

// TestCannotPreallocateWritesFromStart: a ledger whose file cannot be
// preallocated (a file system without fallocate, a seccomp filter that
// refuses it) writes its records with write(2) from the file's start;
// one that meets what a write would meet too (a full disk, a quota, a
// file size limit) is not opened.
func TestCannotPreallocateWritesFromStart(t *testing.T) {
	for _, errno := range []syscall.Errno{syscall.EOPNOTSUPP, syscall.ENODEV, syscall.EPERM, syscall.ENOSYS} {
		t.Run(errno.Error(), func(t *testing.T) {
			failPreallocate(t, errno)
			writesFromStart(t)
		})
	}
	for _, errno := range []syscall.Errno{syscall.ENOSPC, syscall.EDQUOT, syscall.EFBIG} {
		t.Run(errno.Error(), func(t *testing.T) {
			failPreallocate(t, errno)
			l, err := openMade(t, filepath.Join(privateTempDir(t), "1.ledger"), Config{}.normalise())
			if err == nil {
				l.close()
				t.Fatal("the ledger opened; want the error a write(2) meets too")
			}
			if !errors.Is(err, errno) {
				t.Errorf("open: %v; want %v", err, errno)
			}
		})
	}
}

func writesFromStart(t *testing.T) {
	l, dir, path := openTestLedger(t)
	if l.m != nil {
		t.Fatal("the ledger is mapped; want it written with write(2)")
	}
	data := runOnceAndRead(t, l, path)
	if end := parse(data, func(view, int, int) {}); end != len(data) {
		t.Errorf("parse took %d bytes of the file's %d; want all of them records", end, len(data))
	}
	if !ledgerwire.Opened(data[:min(len(data), ledgerwire.MaxOpened)], "testkey", os.Getpid()) {
		t.Error("the host's check does not find the opened record first in the file")
	}
	if f := lookupIn(t, dir, "aaaaaaaaaaaaaaaaaaaaaaaa"); f.completed == nil {
		t.Errorf("successor's lookup = %+v; want the call completed", f)
	}
}

// openTestLedger opens a ledger, with the default config, at 1.ledger in
// a private temp dir, and closes it when the test ends.
func openTestLedger(t *testing.T) (l *ledger, dir, path string) {
	t.Helper()
	dir = privateTempDir(t)
	path = filepath.Join(dir, "1.ledger")
	l, err := openMade(t, path, Config{}.normalise())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.close() })
	return l, dir, path
}

// runOnceAndRead runs one call, "aaaaaaaaaaaaaaaaaaaaaaaa", through l and
// returns the ledger file at path.
func runOnceAndRead(t *testing.T, l *ledger, path string) []byte {
	t.Helper()
	ran := 0
	if _, err := l.run(context.Background(), testMethod, "aaaaaaaaaaaaaaaaaaaaaaaa", nil, okHandler(&ran)); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}
