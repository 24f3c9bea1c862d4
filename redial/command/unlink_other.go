//go:build !unix

package command

import (
	"errors"
	"io/fs"
	"os"
)

// unlink removes the entry at path, which is not a directory, without
// following it; an entry already gone is no error.
func unlink(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}
