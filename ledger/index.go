package ledger

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/grpc-respawn/respawn/internal/ledgerwire"
)

// key names one call: a retry is answered only from the records of its own
// id and method.
type key struct{ id, method string }

// found is what the ledgers hold about one call.
type found struct {
	completed *record // a completed record, if any file has one
	started   bool    // a started record, if any file has one
}

// index reads the dead plugins' ledger files that retries name. A lookup
// reads each file it names through, in chunks, keeping only where the
// records of the call it looks for are: what it holds does not grow with
// the file, and a replay reads its record again. A file is opened when a
// retry names it, kept open while a retry that was waiting meanwhile names
// it again (so that one replaced at its name is told from the one read),
// and closed, with the scratch buffer dropped, once no retry is looking
// anything up: a plugin holds a dead plugin's file only while a retry
// needs it, so that the host's removal of the file frees its disk space,
// and a plugin that gets no retry never reads a file.
type index struct {
	dir string

	lookups atomic.Int32 // lookups begun and not yet done

	mu      sync.Mutex
	files   map[string]*ledgerFile // by name
	scratch []byte
}

type ledgerFile struct {
	f  *os.File    // nil: not a regular file, never read
	fi os.FileInfo // f's, to tell it from another file at its name
}

// frameAt is where a record's frame is: its offset and payload length.
type frameAt struct {
	off int64
	n   int
}

// lookup finds what the ledger files named in names hold about k: the
// files of the dead plugins the call may have run on, as the host names
// them. A name that is not a ledger file's, or a file that cannot be read
// (removed, not a regular file), is an error: whether the call ran cannot
// be told then.
func (x *index) lookup(k key, names []string) (found, error) {
	if len(names) == 0 || len(names) > ledgerwire.MaxRetryFiles {
		return found{}, fmt.Errorf("a retry names %d ledger files", len(names))
	}
	x.lookups.Add(1)
	x.mu.Lock()
	defer x.mu.Unlock()
	defer x.done()
	if x.files == nil {
		x.files = make(map[string]*ledgerFile)
	}
	for _, name := range names {
		if !ledgerwire.IsFileName(name) {
			return found{}, fmt.Errorf("%q is not a ledger file's name", name)
		}
		path := filepath.Join(x.dir, name)
		lf := x.files[name]
		if lf != nil {
			// Open since a retry that was under way with this one: still
			// the file at its name? The host removes none that a call in
			// flight may need, so one gone went with its directory, and
			// its records cannot be trusted to be all there are.
			if st, err := os.Lstat(path); err != nil || !os.SameFile(st, lf.fi) {
				return found{}, fmt.Errorf("%s is no longer the ledger file read before (%v)", name, err)
			}
		}
		if lf == nil {
			var err error
			if lf, err = openLedger(path); err != nil {
				return found{}, err
			}
			if lf.f == nil {
				return found{}, fmt.Errorf("%s is not a regular file", name)
			}
			x.files[name] = lf
		}
	}
	var f found
	for _, name := range names {
		lf := x.files[name]
		at, completed, started, err := x.scan(lf, k)
		if err != nil {
			return found{}, fmt.Errorf("%s: %w", name, err)
		}
		if completed {
			r, err := lf.read(at)
			if err != nil {
				// It completed, but its record cannot be read again.
				r = record{kind: kindCompleted, id: k.id, method: k.method}
			}
			return found{completed: &r}, nil
		}
		f.started = f.started || started
	}
	return f, nil
}

// done ends a lookup. The last of those under way closes every file read,
// and drops what was read of them. x.mu is held.
func (x *index) done() {
	if x.lookups.Add(-1) != 0 {
		return
	}
	for _, lf := range x.files {
		lf.close()
	}
	x.files, x.scratch = nil, nil
}

// openLedger opens a ledger file to read. A symlink or anything but a
// regular file is kept as never read: the directory is the host's, and
// nothing in it makes a plugin read a path outside it.
func openLedger(path string) (*ledgerFile, error) {
	lf := &ledgerFile{}
	f, err := openRead(path)
	if err != nil {
		if fi, lerr := os.Lstat(path); lerr == nil && !fi.Mode().IsRegular() {
			return lf, nil
		}
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		_ = f.Close()
		return lf, nil
	}
	lf.f, lf.fi = f, fi
	return lf, nil
}

// scan reads lf through, up to its end or its first frame that is torn or
// corrupt (one being written is read whole by a later lookup; one left by
// a death ends the file), and returns where the last completed record of
// k is, if there is one, and whether there is a started record of k.
func (x *index) scan(lf *ledgerFile, k key) (last frameAt, completed, started bool, err error) {
	if lf.f == nil {
		return frameAt{}, false, false, nil
	}
	fi, err := lf.f.Stat()
	if err != nil {
		return frameAt{}, false, false, err
	}
	size := fi.Size()
	chunk := int64(scanChunk)
	for off := int64(0); size-off >= headerSize; {
		want := min(size-off, chunk)
		if int64(cap(x.scratch)) < want {
			x.scratch = make([]byte, want)
		}
		buf := x.scratch[:want]
		if _, err := lf.f.ReadAt(buf, off); err != nil {
			return frameAt{}, false, false, err
		}
		base := off
		took := parse(buf, func(v view, at, n int) {
			if !v.is(k) {
				return
			}
			switch v.kind {
			case kindStarted:
				started = true
			case kindCompleted:
				last, completed = frameAt{base + int64(at), n}, true
			}
		})
		off += int64(took)
		if took > 0 {
			continue
		}
		// The first frame is torn or corrupt, or longer than the chunk:
		// read it whole if the file holds it, else the file ends here.
		n, ok := ledgerwire.FrameLen(buf, size-off)
		if !ok || int64(headerSize+n) <= want {
			break
		}
		chunk = int64(headerSize + n)
	}
	return last, completed, started, nil
}

// scanChunk is how much of a file scan reads at a time, more for a frame
// that is longer.
const scanChunk = 1 << 20

// read reads the record of the frame at at again, checking it as scan did.
func (lf *ledgerFile) read(at frameAt) (record, error) {
	b := make([]byte, headerSize+at.n)
	if _, err := lf.f.ReadAt(b, at.off); err != nil {
		return record{}, err
	}
	if !ledgerwire.CheckFrame(b[:headerSize], b[headerSize:]) {
		return record{}, errCorrupt
	}
	return decode(b[headerSize:])
}

func (lf *ledgerFile) close() {
	if lf.f != nil {
		_ = lf.f.Close()
	}
}
