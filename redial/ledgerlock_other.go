//go:build !unix || aix

package redial

import (
	"errors"
	"os"
)

// lockDir: without flock(2) a Conn's ledger directory is not locked, has
// no owner file, and is never swept.
func lockDir(*os.File) error { return errors.ErrUnsupported }

func ownedByUs(os.FileInfo) bool { return false }
