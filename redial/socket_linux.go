package redial

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// seenSocket is the socket a plugin printed, as it was at handshake. On
// Linux it holds an O_PATH descriptor of it: while that is open the inode
// cannot be freed, so no other file can have its device and inode numbers,
// and "same numbers at stop" means "the very socket we saw".
type seenSocket struct {
	fd       int
	dev, ino uint64
}

// lookSocket records the socket at path, which must be one.
func lookSocket(path string) (*seenSocket, error) {
	fd, err := unix.Open(path, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		_ = unix.Close(fd)
		return nil, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		_ = unix.Close(fd)
		return nil, fmt.Errorf("not a unix socket (mode %#o)", st.Mode)
	}
	return &seenSocket{fd: fd, dev: st.Dev, ino: st.Ino}, nil
}

// remove unlinks path if it still is the socket seen at handshake, then
// lets go of it.
func (s *seenSocket) remove(path string) {
	var st unix.Stat_t
	if unix.Lstat(path, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFSOCK && st.Dev == s.dev && st.Ino == s.ino {
		_ = unix.Unlink(path)
	}
	_ = unix.Close(s.fd)
}
