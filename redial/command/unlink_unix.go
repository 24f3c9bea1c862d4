//go:build unix

package command

import (
	"errors"
	"io/fs"
	"syscall"
)

// unlink removes the directory entry at path, which is not a directory,
// without following it; an entry already gone is no error.
func unlink(path string) error {
	if err := syscall.Unlink(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return &fs.PathError{Op: "unlink", Path: path, Err: err}
	}
	return nil
}
