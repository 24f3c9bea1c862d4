package redial

// A Conn's ledger directory, for a call policy that asks for one
// ([Handle.KeepLedgers]): a directory of the host's own (mode 0700, one per
// Conn), in which each launch is given a file of its own to create, named
// in its environment (RESPAWN_LEDGER), so that a plugin's record of the
// calls it ran outlives its process. redial never reads a ledger; it
// checks that a plugin made its file, and removes a dead plugin's file once
// no call that was in flight on it can still be retried, and every file of
// the directory, and the directory, at Close. Only names of ledger files
// are ever looked at or removed, through an os.Root opened on the
// directory when it is made: neither a link in it nor the directory moved
// and replaced makes redial touch a path outside it.

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/grpc-respawn/respawn/internal/ledgerwire"
)

// ledgers is a Conn's ledger directory, made at the first launch after
// KeepLedgers.
type ledgers struct {
	on   atomic.Bool
	once sync.Once
	dir  string
	root *os.Root    // the directory, as made
	made os.FileInfo // the directory, as made, to tell it from a replacement
	err  error
	seq  atomic.Uint64 // launches given a file
}

// ledgerFile is one launch's ledger file.
type ledgerFile struct {
	root  *os.Root
	name  string
	holds atomic.Int64 // calls in flight that may need it
	dead  atomic.Bool  // its plugin is stopped: nothing writes it any more
	mu    sync.Mutex
	gone  bool // removed
}

// next returns the file of a new launch and the environment entry that
// names it, nil and "" without ledgers. A directory that cannot be made is
// an error: a host that asked for ledgers would otherwise lose them silently.
func (l *ledgers) next() (*ledgerFile, string, error) {
	if !l.on.Load() {
		return nil, "", nil
	}
	l.once.Do(l.make)
	if l.err != nil {
		return nil, "", l.err
	}
	f := &ledgerFile{root: l.root, name: ledgerwire.FileName(l.seq.Add(1))}
	return f, ledgerwire.Env + "=" + filepath.Join(l.dir, f.name), nil
}

// make makes a fresh directory of our own, mode 0700, in the temporary
// directory, checks that it is one, and opens it as a root.
func (l *ledgers) make() {
	dir, err := os.MkdirTemp("", "respawn-ledger-")
	if err != nil {
		l.err = fmt.Errorf("redial: ledger directory: %w", err)
		return
	}
	st, err := os.Lstat(dir)
	if err == nil && (!st.IsDir() || st.Mode().Perm() != 0o700) {
		err = fmt.Errorf("mode %v", st.Mode())
	}
	var root *os.Root
	if err == nil {
		root, err = os.OpenRoot(dir)
	}
	if err != nil {
		_ = os.Remove(dir)
		l.err = fmt.Errorf("redial: ledger directory %s is not a private directory: %w", dir, err)
		return
	}
	l.dir, l.root, l.made = dir, root, st
}

// close removes every ledger file left in the directory, a launch the
// Conn stopped waiting for included, and then the directory, if it is
// still the one made. Anything else a plugin put there is left, and so is
// the directory then.
func (l *ledgers) close() {
	if l.root == nil {
		return
	}
	if d, err := l.root.Open("."); err == nil {
		names, _ := d.Readdirnames(-1)
		_ = d.Close()
		for _, name := range names {
			if ledgerwire.IsFileName(name) {
				_ = l.root.Remove(name)
			}
		}
	}
	_ = l.root.Close()
	if st, err := os.Lstat(l.dir); err == nil && os.SameFile(st, l.made) {
		_ = os.Remove(l.dir)
	}
}

// kept reports whether the plugin made its ledger file: a regular file,
// not a link, still there.
func (f *ledgerFile) kept() bool {
	if f == nil {
		return false
	}
	f.mu.Lock()
	gone := f.gone
	f.mu.Unlock()
	if gone {
		return false
	}
	st, err := f.root.Lstat(f.name)
	return err == nil && st.Mode().IsRegular()
}

// size returns the file's size in bytes, 0 if it has none.
func (f *ledgerFile) size() int64 {
	if f == nil {
		return 0
	}
	st, err := f.root.Lstat(f.name)
	if err != nil || !st.Mode().IsRegular() {
		return 0
	}
	return st.Size()
}

// hold counts a call in flight that may need the file.
func (f *ledgerFile) hold() {
	if f != nil {
		f.holds.Add(1)
	}
}

// release ends a hold; the last one on a dead plugin's file removes it.
func (f *ledgerFile) release() {
	if f != nil && f.holds.Add(-1) == 0 && f.dead.Load() {
		f.remove()
	}
}

// die records that the plugin is stopped, and removes the file if no call
// holds it.
func (f *ledgerFile) die() {
	if f == nil {
		return
	}
	f.dead.Store(true)
	if f.holds.Load() == 0 {
		f.remove()
	}
}

func (f *ledgerFile) remove() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.gone || f.holds.Load() != 0 {
		return
	}
	f.gone = true
	_ = f.root.Remove(f.name)
}
