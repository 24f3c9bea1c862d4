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

func wantFound(t *testing.T, x *index, k key, want string) {
	t.Helper()
	f, err := x.lookup(k)
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
// is whole; a file that appears later is found, one removed is forgotten.
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

	wantFound(t, x, key{"a", m}, "completed")
	wantFound(t, x, key{"a", "/s.S/Other"}, "none")
	wantFound(t, x, key{"b", m}, "started")
	appendFile(t, one, torn[len(torn)/2:])
	wantFound(t, x, key{"b", m}, "completed")

	wantFound(t, x, key{"c", m}, "none")
	two := filepath.Join(dir, "2.ledger")
	appendFile(t, two, appendStarted(nil, "c", m))
	wantFound(t, x, key{"c", m}, "started")
	appendFile(t, two, appendRecord(nil, completedOK("c", m)))
	wantFound(t, x, key{"c", m}, "completed")

	if err := os.Remove(one); err != nil {
		t.Fatal(err)
	}
	wantFound(t, x, key{"a", m}, "none")
	if got := len(x.files); got != 1 {
		t.Errorf("files indexed after one was removed: %d, want 1", got)
	}
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
	wantFound(t, x, key{"a", "/s.S/M"}, "started")
	if got := cap(x.scratch); got > 100 {
		t.Errorf("scratch grew to %d bytes for a file of %d", got, 100+headerSize)
	}
}

// TestIndexReadsOnlyLedgers: only regular files with a ledger file's name
// are read; a symlink to a ledger elsewhere and a FIFO are not, and the
// FIFO does not block the reader.
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
	appendFile(t, filepath.Join(dir, "notes"), appendRecord(nil, completedOK("notes", m)))
	appendFile(t, filepath.Join(dir, "1.ledger.tmp"), appendRecord(nil, completedOK("tmp", m)))
	appendFile(t, filepath.Join(dir, "1.ledger"), appendRecord(nil, completedOK("real", m)))
	x := &index{dir: dir}
	defer x.close()
	for _, id := range []string{"link", "notes", "tmp"} {
		wantFound(t, x, key{id, m}, "none")
	}
	wantFound(t, x, key{"real", m}, "completed")
}

// TestIndexDirGone: a directory that cannot be read is an error, not "no
// record".
func TestIndexDirGone(t *testing.T) {
	x := &index{dir: filepath.Join(t.TempDir(), "gone")}
	if _, err := x.lookup(key{"a", "/s.S/M"}); err == nil {
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
