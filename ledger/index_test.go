//go:build unix

package ledger

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func appendFile(t *testing.T, path string, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
}

func completedOK(id, method string) record {
	return record{kind: kindCompleted, id: id, method: method, kept: true, respType: "t.R", resp: []byte("resp-" + id)}
}

func wantFound(t *testing.T, x *index, k key, names []string, want string) {
	t.Helper()
	f, err := x.lookup(k, names)
	if err != nil {
		t.Fatalf("lookup(%v): %v", k, err)
	}
	got := "none"
	switch {
	case f.completed != nil:
		got = "completed"
		if want == got && f.completed.kept && string(f.completed.resp) != "resp-"+k.id {
			t.Errorf("lookup(%v): response %q, want %q", k, f.completed.resp, "resp-"+k.id)
		}
	case f.started:
		got = "started"
	}
	if got != want {
		t.Errorf("lookup(%v) = %s, want %s", k, got, want)
	}
}

// TestIndexIncremental: a torn last frame is not read, and is read once it
// is whole; a file named later is read then; one named that is gone is an
// error.
func TestIndexIncremental(t *testing.T) {
	dir := t.TempDir()
	const m = "/s.S/M"
	one := filepath.Join(dir, "1.ledger")
	appendFile(t, one, appendStarted(nil, "a", m))
	appendFile(t, one, appendRecord(nil, completedOK("a", m)))
	appendFile(t, one, appendStarted(nil, "b", m))
	torn := appendRecord(nil, completedOK("b", m))
	appendFile(t, one, torn[:len(torn)/2])
	x := &index{dir: dir}
	defer x.close()
	first := []string{"1.ledger"}

	wantFound(t, x, key{"a", m}, first, "completed")
	wantFound(t, x, key{"a", "/s.S/Other"}, first, "none")
	wantFound(t, x, key{"b", m}, first, "started")
	appendFile(t, one, torn[len(torn)/2:])
	wantFound(t, x, key{"b", m}, first, "completed")

	two := filepath.Join(dir, "2.ledger")
	appendFile(t, two, appendStarted(nil, "c", m))
	wantFound(t, x, key{"c", m}, first, "none")
	both := []string{"1.ledger", "2.ledger"}
	wantFound(t, x, key{"c", m}, both, "started")
	appendFile(t, two, appendRecord(nil, completedOK("c", m)))
	wantFound(t, x, key{"c", m}, both, "completed")
	wantFound(t, x, key{"a", m}, []string{"2.ledger"}, "none")

	if err := os.Remove(one); err != nil {
		t.Fatal(err)
	}
	if _, err := x.lookup(key{"a", m}, first); err == nil {
		t.Error("lookup naming a file that is gone: nil error, want one")
	}
}

// TestIndexReleases: the files a lookup read are kept, parsed, while
// another lookup is under way, which finds a file removed meanwhile an
// error; once none is, no file is open and nothing read is kept.
func TestIndexReleases(t *testing.T) {
	dir := t.TempDir()
	const m = "/s.S/M"
	one := filepath.Join(dir, "1.ledger")
	appendFile(t, one, appendRecord(nil, completedOK("a", m)))
	x := &index{dir: dir}
	defer x.close()

	x.lookups.Add(1) // another retry's lookup, under way
	wantFound(t, x, key{"a", m}, []string{"1.ledger"}, "completed")
	if len(x.files) != 1 {
		t.Fatalf("files kept while a lookup is under way: %d, want 1", len(x.files))
	}
	if err := os.Remove(one); err != nil {
		t.Fatal(err)
	}
	appendFile(t, one, appendRecord(nil, completedOK("b", m))) // another file at its name
	if f, err := x.lookup(key{"b", m}, []string{"1.ledger"}); err == nil {
		t.Errorf("lookup naming a file replaced since it was read = %+v, nil error; want an error", f)
	}
	x.mu.Lock()
	x.done() // the other lookup ends
	x.mu.Unlock()
	if x.files != nil || x.scratch != nil {
		t.Errorf("after the last lookup: %d files, %d bytes of scratch kept; want none", len(x.files), cap(x.scratch))
	}
	wantFound(t, x, key{"b", m}, []string{"1.ledger"}, "completed")
}

// TestIndexHugeLength: a length field never makes the reader allocate more
// than the file has left, and ends the file.
func TestIndexHugeLength(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "1.ledger")
	appendFile(t, path, appendStarted(nil, "a", "/s.S/M"))
	hdr := binary.LittleEndian.AppendUint32(nil, 1<<30)
	appendFile(t, path, append(hdr, make([]byte, 100)...))
	x := &index{dir: dir}
	defer x.close()
	x.lookups.Add(1) // another lookup under way: the scratch buffer is kept, to be measured
	wantFound(t, x, key{"a", "/s.S/M"}, []string{"1.ledger"}, "started")
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := int64(cap(x.scratch)); got > fi.Size() {
		t.Errorf("scratch grew to %d bytes for a file of %d", got, fi.Size())
	}
}

// TestIndexReadsOnlyLedgers: only regular files with a ledger file's name
// are read; naming a symlink to a ledger elsewhere, a FIFO (which does not
// block the reader), a directory, or another name is an error, never a
// record.
func TestIndexReadsOnlyLedgers(t *testing.T) {
	dir, outside := t.TempDir(), t.TempDir()
	const m = "/s.S/M"
	elsewhere := filepath.Join(outside, "9.ledger")
	appendFile(t, elsewhere, appendRecord(nil, completedOK("link", m)))
	if err := os.Symlink(elsewhere, filepath.Join(dir, "3.ledger")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "4.ledger"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "5.ledger"), 0o700); err != nil {
		t.Fatal(err)
	}
	appendFile(t, filepath.Join(dir, "notes"), appendRecord(nil, completedOK("link", m)))
	appendFile(t, filepath.Join(dir, "1.ledger"), appendRecord(nil, completedOK("real", m)))
	x := &index{dir: dir}
	defer x.close()
	for _, name := range []string{"3.ledger", "4.ledger", "5.ledger", "notes", "../" + filepath.Base(outside) + "/9.ledger", "", "1.ledger,2.ledger"} {
		if f, err := x.lookup(key{"link", m}, []string{name}); err == nil {
			t.Errorf("lookup naming %q = %+v, nil error; want an error", name, f)
		}
	}
	wantFound(t, x, key{"real", m}, []string{"1.ledger"}, "completed")
	if _, err := x.lookup(key{"real", m}, nil); err == nil {
		t.Error("lookup naming no file: nil error, want one")
	}
}

// TestIndexDirGone: a directory that cannot be read is an error, not "no
// record".
func TestIndexDirGone(t *testing.T) {
	x := &index{dir: filepath.Join(t.TempDir(), "gone")}
	if _, err := x.lookup(key{"a", "/s.S/M"}, []string{"1.ledger"}); err == nil {
		t.Error("lookup in a directory that does not exist: nil error, want one")
	}
}

// privateTempDir returns a new directory of mode 0700, as the host makes
// one for a Conn's ledgers.
func privateTempDir(t *testing.T) string { return privateSubdir(t, t.TempDir()) }

func privateSubdir(tb testing.TB, parent string) string {
	tb.Helper()
	dir := filepath.Join(parent, "ledgers")
	if err := os.Mkdir(dir, 0o700); err != nil {
		tb.Fatal(err)
	}
	return dir
}

// TestIndexFrameLongerThanChunk: a record longer than what scan reads at a
// time (a response near MaxResponse) is read whole, and so are the records
// after it.
func TestIndexFrameLongerThanChunk(t *testing.T) {
	dir := t.TempDir()
	const m = "/s.S/M"
	path := filepath.Join(dir, "1.ledger")
	big := completedOK("big", m)
	big.resp = make([]byte, scanChunk+scanChunk/2)
	appendFile(t, path, appendRecord(nil, big))
	appendFile(t, path, appendStarted(nil, "after", m))
	x := &index{dir: dir}
	defer x.close()
	f, err := x.lookup(key{"big", m}, []string{"1.ledger"})
	if err != nil || f.completed == nil || len(f.completed.resp) != len(big.resp) {
		t.Fatalf("lookup of a %d-byte record: %+v, %v; want it completed, whole", len(big.resp), f.started, err)
	}
	wantFound(t, x, key{"after", m}, []string{"1.ledger"}, "started")
}
