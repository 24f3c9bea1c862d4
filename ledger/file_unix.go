//go:build unix

package ledger

import (
	"fmt"
	"os"
	"syscall"
)

// openGiven opens the ledger file the host made, to append to it or map
// it (which takes reading it too), never through a symlink nor waiting
// for a reader if it is a FIFO. It must be a regular file of this user's,
// that only this user can read, and empty: one that another process
// opened first is not this plugin's.
func openGiven(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_APPEND|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	switch {
	case err != nil:
	case !fi.Mode().IsRegular():
		err = fmt.Errorf("%s is not a regular file", path)
	case fi.Mode().Perm()&0o077 != 0:
		err = fmt.Errorf("%s has mode %#o: others could read the responses it holds", path, fi.Mode().Perm())
	case fi.Size() != 0:
		err = fmt.Errorf("%s was written by another process already", path)
	default:
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
			err = fmt.Errorf("%s belongs to uid %d, not to this process's %d", path, st.Uid, os.Geteuid())
		}
	}
	if err != nil {
		_ = f.Close()
		return nil, err
	}
	return f, nil
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
