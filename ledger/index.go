package ledger

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"

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

// index is what retries know of the ledger files of the directory (this
// plugin's own among them). It is built on the first retry, so a plugin
// that gets none never reads a file, and brought up to date on each: new
// files are opened, each file is parsed on from where it was left, and
// files that are gone are closed and forgotten. Responses are not held in
// memory: a replay reads its record again.
type index struct {
	dir string

	mu      sync.Mutex
	files   map[string]*ledgerFile // by name
	names   []string               // of files, sorted, so that lookups are deterministic
	methods map[string]string      // interned method names
	scratch []byte
}

type ledgerFile struct {
	f         *os.File // nil: not a regular file, never read
	off       int64    // parsed up to here
	started   map[key]struct{}
	completed map[key]frameAt
}

// frameAt is where a record's frame is: its offset and payload length.
type frameAt struct {
	off int64
	n   int
}

func (x *index) lookup(k key) (found, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if err := x.refresh(); err != nil {
		return found{}, err
	}
	for _, name := range x.names {
		lf := x.files[name]
		if at, ok := lf.completed[k]; ok {
			r, err := lf.read(at)
			if err != nil {
				// It completed, but its record cannot be read again.
				r = record{kind: kindCompleted, id: k.id, method: k.method}
			}
			return found{completed: &r}, nil
		}
	}
	for _, name := range x.names {
		if _, ok := x.files[name].started[k]; ok {
			return found{started: true}, nil
		}
	}
	return found{}, nil
}

// refresh brings the index up to date with the directory.
func (x *index) refresh() error {
	ents, err := os.ReadDir(x.dir)
	if err != nil {
		return err
	}
	if x.files == nil {
		x.files = make(map[string]*ledgerFile)
		x.methods = make(map[string]string)
	}
	names := x.names[:0:0]
	for _, e := range ents {
		name := e.Name()
		if !ledgerwire.IsFileName(name) {
			continue
		}
		lf := x.files[name]
		if lf == nil {
			if lf, err = openLedger(filepath.Join(x.dir, name)); err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					continue // removed since ReadDir
				}
				return err
			}
			x.files[name] = lf
		}
		if err := x.scan(lf); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		names = append(names, name)
	}
	for name, lf := range x.files {
		if !slices.Contains(names, name) {
			lf.close()
			delete(x.files, name)
		}
	}
	x.names = names // ReadDir sorts them
	return nil
}

// openLedger opens a ledger file to read. A symlink or anything but a
// regular file is kept as never read: the directory is the host's, and
// nothing in it makes a plugin read a path outside it.
func openLedger(path string) (*ledgerFile, error) {
	lf := &ledgerFile{started: make(map[key]struct{}), completed: make(map[key]frameAt)}
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
	lf.f = f
	return lf, nil
}

// scan parses lf on from where it was left, up to its end or its first
// frame that is torn or corrupt: one being written is parsed whole the next
// time; one left by a death ends the file.
func (x *index) scan(lf *ledgerFile) error {
	if lf.f == nil {
		return nil
	}
	fi, err := lf.f.Stat()
	if err != nil {
		return err
	}
	size := fi.Size()
	if size-lf.off < headerSize {
		return nil
	}
	r := bufio.NewReaderSize(io.NewSectionReader(lf.f, lf.off, size-lf.off), 64<<10)
	var hdr [headerSize]byte
	for size-lf.off >= headerSize {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return err
		}
		n, ok := frameLen(hdr[:], size-lf.off)
		if !ok {
			return nil
		}
		if cap(x.scratch) < n {
			x.scratch = make([]byte, n)
		}
		payload := x.scratch[:n]
		if _, err := io.ReadFull(r, payload); err != nil {
			return err
		}
		if !checkFrame(hdr[:], payload) {
			return nil
		}
		rec, err := decode(payload)
		if err != nil {
			return nil
		}
		k := key{rec.id, x.intern(rec.method)}
		if rec.kind == kindStarted {
			lf.started[k] = struct{}{}
		} else {
			lf.completed[k] = frameAt{lf.off, n}
		}
		lf.off += headerSize + int64(n)
	}
	return nil
}

func (x *index) intern(m string) string {
	if s, ok := x.methods[m]; ok {
		return s
	}
	x.methods[m] = m
	return m
}

// read reads the record of the frame at at again, checking it as scan did.
func (lf *ledgerFile) read(at frameAt) (record, error) {
	b := make([]byte, headerSize+at.n)
	if _, err := lf.f.ReadAt(b, at.off); err != nil {
		return record{}, err
	}
	if !checkFrame(b[:headerSize], b[headerSize:]) {
		return record{}, errCorrupt
	}
	return decode(b[headerSize:])
}

func (lf *ledgerFile) close() {
	if lf.f != nil {
		_ = lf.f.Close()
	}
}

func (x *index) close() {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, lf := range x.files {
		lf.close()
	}
	x.files, x.names = nil, nil
}
