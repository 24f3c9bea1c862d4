//go:build !linux

package redial

import (
	"fmt"
	"os"
)

// seenSocket is the socket a plugin printed, as it was at handshake: its
// identity (device and inode, or Windows' file index) and its modification
// time, which tells a socket apart from a later one that happens to reuse
// a freed inode number unless both were made within one clock tick.
type seenSocket struct{ fi os.FileInfo }

// lookSocket records the socket at path, which must be one.
func lookSocket(path string) (*seenSocket, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return nil, err
	}
	if fi.Mode()&os.ModeSocket == 0 {
		return nil, fmt.Errorf("not a unix socket but a %v", fi.Mode().Type())
	}
	return &seenSocket{fi: fi}, nil
}

// remove removes path if it still is the socket seen at handshake.
func (s *seenSocket) remove(path string) {
	fi, err := os.Lstat(path)
	if err != nil || fi.Mode()&os.ModeSocket == 0 || !os.SameFile(fi, s.fi) || !fi.ModTime().Equal(s.fi.ModTime()) {
		return
	}
	_ = os.Remove(path)
}
