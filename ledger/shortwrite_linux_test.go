package ledger

import (
	"context"
	"os/signal"
	"path/filepath"
	"syscall"
	"testing"
)

// TestShortWriteCutBack: a record that the file system takes only part of
// (a full disk, a quota, here RLIMIT_FSIZE) fails its call unrun and is cut
// back off the file, so that the records written once space is back are
// read by a successor. Left in the file, the torn frame would hide them,
// and the successor would run again a call that had completed. On a file
// system that cannot preallocate, where the records are written with
// write(2).
func TestShortWriteCutBack(t *testing.T) {
	signal.Ignore(syscall.SIGXFSZ) // the write fails with EFBIG instead
	cannotPreallocate(t)
	dir := privateTempDir(t)
	l, err := openMade(t, filepath.Join(dir, "1.ledger"), Config{}.normalise())
	if err != nil {
		t.Fatal(err)
	}
	defer l.close()
	ran := 0
	h := func(context.Context, any) (any, error) { ran++; return nil, nil }
	ctx := context.Background()
	const m = "/x.Svc/Append"
	if _, err := l.run(ctx, m, "aaaaaaaaaaaaaaaaaaaaaaaa", nil, h); err != nil {
		t.Fatal(err)
	}
	before, err := l.f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	err = withFileSizeLimit(t, before.Size()+10, func() error { // room for 10 bytes of the next record
		_, err := l.run(ctx, m, "bbbbbbbbbbbbbbbbbbbbbbbb", nil, h)
		return err
	})
	if err == nil || ran != 1 {
		t.Fatalf("a call whose started record did not fit: %v, handler ran %d times; want an error, 1 (the first call only)", err, ran)
	}
	if after, err := l.f.Stat(); err != nil || after.Size() != before.Size() {
		t.Fatalf("file is %v bytes after the failed record (%v), want %d: the torn frame was not cut back", after.Size(), err, before.Size())
	}
	if _, err := l.run(ctx, m, "cccccccccccccccccccccccc", nil, h); err != nil {
		t.Fatal(err)
	}
	x := &index{dir: dir}
	defer x.close()
	f, err := x.lookup(key{"cccccccccccccccccccccccc", m}, []string{"1.ledger"})
	if err != nil || f.completed == nil {
		t.Errorf("successor's lookup of a call recorded after the failed write = %+v, %v; want it completed", f, err)
	}
}
