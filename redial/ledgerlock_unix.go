//go:build unix && !aix

package redial

import (
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// lockDir takes an exclusive flock(2) on the directory d without waiting:
// held until d is closed or its process exits, whatever ends it.
func lockDir(d *os.File) error {
	rc, err := d.SyscallConn()
	if err != nil {
		return err
	}
	var lerr error
	if err := rc.Control(func(fd uintptr) { lerr = unix.Flock(int(fd), unix.LOCK_EX|unix.LOCK_NB) }); err != nil {
		return err
	}
	return lerr
}

// ownedByUs reports whether st is of a file of this process's user.
func ownedByUs(st os.FileInfo) bool {
	sys, ok := st.Sys().(*syscall.Stat_t)
	return ok && int(sys.Uid) == os.Geteuid()
}
