package redial

// A Conn's ledger directory on disk: made at its first launch, removed at
// Close, and, for a host killed before its Close, removed by the next Conn
// that makes one (sweepLedgerDirs). A Conn holds an exclusive flock(2) on
// its directory for as long as its process lives, and says so with a file
// named owner in it: a directory with that file whose lock anyone can take
// belongs to a host that is gone.

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/grpc-respawn/respawn/internal/ledgerwire"
)

// ledgerDirPrefix begins the name of every Conn's ledger directory, in the
// temporary directory; decimal digits follow it (os.MkdirTemp's).
const ledgerDirPrefix = "respawn-ledger-"

// ownerFile, in a ledger directory, says that the Conn that made it holds
// the directory's lock; it holds the Conn's pid, for an operator to read.
const ownerFile = "owner"

// make sweeps the ledger directories of hosts that are gone, then makes a
// fresh directory of our own, mode 0700, in the temporary directory,
// checks that it is one, opens it as a root, and locks it. Its path is
// absolute, as a plugin takes only an absolute path for its ledger's,
// whatever TMPDIR says.
func (l *ledgers) make() {
	tmp, err := filepath.Abs(os.TempDir())
	if err != nil {
		l.err = fmt.Errorf("redial: ledger directory: %w", err)
		return
	}
	sweepLedgerDirs(tmp)
	dir, err := os.MkdirTemp(tmp, ledgerDirPrefix)
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
	l.lock = lockOwned(root)
}

// lockOwned locks the directory of root for as long as this process lives
// (or until close) and then writes its owner file; nil if it cannot lock
// it (a file system without flock(2)): the directory then has no owner
// file, and no sweep ever removes it.
func lockOwned(root *os.Root) *os.File {
	d, err := root.Open(".")
	if err != nil {
		return nil
	}
	if lockDir(d) != nil {
		_ = d.Close()
		return nil
	}
	f, err := root.OpenFile(ownerFile, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err == nil {
		_, err = f.WriteString(strconv.Itoa(os.Getpid()) + "\n")
		_ = f.Close()
	}
	if err != nil {
		_ = root.Remove(ownerFile)
	}
	return d
}

// close removes every ledger file left in the directory, a launch the
// Conn stopped waiting for included, its owner file, and then the
// directory, if it is still the one made, and releases its lock. Anything
// else a plugin put there is left, and so is the directory then.
func (l *ledgers) close() {
	if l.root == nil {
		return
	}
	removeLedgerFiles(l.root)
	_ = l.root.Close()
	if st, err := os.Lstat(l.dir); err == nil && os.SameFile(st, l.made) {
		_ = os.Remove(l.dir)
	}
	if l.lock != nil {
		_ = l.lock.Close()
	}
}

// removeLedgerFiles removes the ledger files and then the owner file of
// the directory of root, and nothing else: not a directory under such a
// name (which os.Root.Remove would remove if empty); unlinking never
// follows a link. The owner file goes last, so that a cleanup cut short
// (the host killed in it) leaves a directory that a later sweep still
// takes for a ledger directory.
func removeLedgerFiles(root *os.Root) {
	d, err := root.Open(".")
	if err != nil {
		return
	}
	names, _ := d.Readdirnames(-1)
	_ = d.Close()
	for _, name := range names {
		if ledgerwire.IsFileName(name) {
			removeFile(root, name)
		}
	}
	removeFile(root, ownerFile)
}

// removeFile unlinks name in root unless it is a directory.
func removeFile(root *os.Root, name string) {
	if st, err := root.Lstat(name); err == nil && !st.IsDir() {
		_ = root.Remove(name)
	}
}

// sweepLedgerDirs removes, in tmp, the ledger directories of hosts that
// are gone: directories, not links, named by ledgerDirPrefix and digits,
// of this user's, mode 0700, with an owner file (a regular file), whose
// lock this process can take: the process that held it has exited. In
// each it removes the ledger files and the owner file, and the directory
// if nothing else is left in it. Anything else is left alone.
func sweepLedgerDirs(tmp string) {
	d, err := os.Open(tmp)
	if err != nil {
		return
	}
	names, _ := d.Readdirnames(-1)
	_ = d.Close()
	for _, name := range names {
		if digits, ok := strings.CutPrefix(name, ledgerDirPrefix); ok && isDigits(digits) {
			sweepLedgerDir(filepath.Join(tmp, name))
		}
	}
}

func sweepLedgerDir(dir string) {
	st, err := os.Lstat(dir)
	if err != nil || !st.IsDir() || st.Mode().Perm() != 0o700 || !ownedByUs(st) {
		return
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return
	}
	defer root.Close()
	d, err := root.Open(".")
	if err != nil {
		return
	}
	defer d.Close()
	if at, err := d.Stat(); err != nil || !os.SameFile(at, st) {
		return // replaced since it was looked at
	}
	if owner, err := root.Lstat(ownerFile); err != nil || !owner.Mode().IsRegular() {
		return // not made by a Conn that locks its directory, or being made
	}
	if lockDir(d) != nil {
		return // its host lives, or another sweep has it
	}
	removeLedgerFiles(root)
	if now, err := os.Lstat(dir); err == nil && os.SameFile(now, st) {
		_ = os.Remove(dir)
	}
}

func isDigits(s string) bool {
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return false
		}
	}
	return s != ""
}
