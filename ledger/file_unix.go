//go:build unix

package ledger

import (
	"fmt"
	"os"
	"syscall"
)

// create creates the ledger file, never through a symlink.
func create(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
}

// openRead opens a ledger file to read, never through a symlink, and
// without waiting for a writer if it is a FIFO.
func openRead(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
}

// privateDir checks that dir is a directory, not a symlink, of this user,
// that no one else can enter: the ledger holds responses.
func privateDir(dir string) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s is not a directory", dir)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return fmt.Errorf("%s has mode %#o: others could read the responses it holds", dir, perm)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("%s belongs to uid %d, not to this process's %d", dir, st.Uid, os.Geteuid())
	}
	return nil
}
