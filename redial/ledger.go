package redial

// A Conn's ledger directory, for a call policy that asks for one
// ([Binding.Ledgers]): a directory of the host's own (mode 0700, one per
// Conn), in which the host makes, empty, a file for each launch, and
// names it and a key of that launch's own in the launch's environment
// (RESPAWN_LEDGER, RESPAWN_LEDGER_KEY), so that a plugin's record of the
// calls it ran outlives its process. The host keeps a descriptor of each
// file it made: it reads the file's first record, to tell that the plugin
// it launched keeps its ledger there, and measures the file through it,
// wherever the file's name went. It removes a dead plugin's file once no
// call that was in flight on it can still be retried, and every file of
// the directory, and the directory, at Close. Only names of ledger files
// are ever looked at or removed, through an os.Root opened on the
// directory when it is made: neither a link in it nor the directory moved
// and replaced makes redial touch a path outside it.

import (
	"crypto/rand"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/grpc-respawn/respawn/internal/ledgerwire"
)

// ledgers is a Conn's ledger directory, made at the first launch if its
// policy's Binding asks for ledgers.
type ledgers struct {
	on   atomic.Bool
	once sync.Once
	dir  string
	root *os.Root    // the directory, as made
	made os.FileInfo // the directory, as made, to tell it from a replacement
	lock *os.File    // the directory, locked while this process lives; nil if it cannot be
	err  error
	seq  atomic.Uint64 // launches given a file
}

// ledgerFile is one launch's ledger file.
type ledgerFile struct {
	root  *os.Root
	name  string
	key   string       // the launch's key, which the file's first record must hold
	file  *os.File     // the host's descriptor of the file it made, read-only
	made  os.FileInfo  // file's, to tell it from another at its name
	holds atomic.Int64 // calls in flight that may need it
	dead  atomic.Bool  // its plugin is stopped: nothing writes it any more
	ours  atomic.Bool  // kept has shown it its plugin's ledger
	mu    sync.Mutex
	gone  bool // removed
}

// noLedger returns the environment entries of a launch that keeps no
// ledger: none, or, in a host that inherited the variables (it is itself
// a plugin given a ledger), entries that clear them, so that its plugin
// does not take the host's own file for its own.
func noLedger() []string {
	_, path := os.LookupEnv(ledgerwire.Env)
	_, key := os.LookupEnv(ledgerwire.KeyEnv)
	if !path && !key {
		return nil
	}
	return []string{ledgerwire.Env + "=", ledgerwire.KeyEnv + "="}
}

// next makes the file of a new launch, and returns it and the environment
// entries that name it and the launch's key; nil and the entries that
// clear them without ledgers, or when the file cannot be made (the
// directory removed, a file already at its name): the launch then keeps
// no ledger. A directory that cannot be made is an error: a host that
// asked for ledgers would otherwise lose them silently.
func (l *ledgers) next() (*ledgerFile, []string, error) {
	if !l.on.Load() || !ledgersSupported {
		return nil, noLedger(), nil
	}
	l.once.Do(l.make)
	if l.err != nil {
		return nil, nil, l.err
	}
	name := ledgerwire.FileName(l.seq.Add(1))
	file, err := l.root.OpenFile(name, os.O_RDONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, noLedger(), nil
	}
	made, err := file.Stat()
	if err != nil {
		_ = file.Close()
		_ = l.root.Remove(name)
		return nil, noLedger(), nil
	}
	f := &ledgerFile{root: l.root, name: name, key: rand.Text(), file: file, made: made}
	return f, []string{ledgerwire.Env + "=" + filepath.Join(l.dir, name), ledgerwire.KeyEnv + "=" + f.key}, nil
}

// kept returns the file's name if the plugin of p keeps its ledger there:
// the file the host made is still at its name, its first record is the
// opened record of the launch's key and of p's pid, the process the hook
// started, and, on Linux, that process was seen holding the file open
// (launchBackend looks once the plugin accepts its connection, while its
// process lives). A file that a process which inherited the launch's
// environment (a child the plugin started before it opened its ledger)
// opened first, that another process wrote, or that p opened before it
// replaced its program (exec) is not; "" then.
func (f *ledgerFile) kept(p *Process) string {
	if f == nil || p == nil {
		return ""
	}
	f.mu.Lock()
	gone := f.gone
	f.mu.Unlock()
	if gone {
		return ""
	}
	if st, err := f.root.Lstat(f.name); err != nil || !os.SameFile(st, f.made) {
		return ""
	}
	if !f.ours.Load() {
		b := make([]byte, ledgerwire.MaxOpened)
		n, _ := f.file.ReadAt(b, 0)
		if !ledgerwire.Opened(b[:n], f.key, p.PID) || !holdsOpen(p.PID, f.name, f.made) || p.ended() {
			return ""
		}
		f.ours.Store(true)
	}
	return f.name
}

// size returns the size in bytes of the file the host made, wherever its
// name went (its directory removed), 0 if it has none.
func (f *ledgerFile) size() int64 {
	if f == nil {
		return 0
	}
	st, err := f.file.Stat()
	if err != nil {
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
	_ = f.file.Close()
}
