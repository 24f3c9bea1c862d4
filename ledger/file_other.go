//go:build !unix

package ledger

import (
	"errors"
	"os"
)

var errNotUnix = errors.New("the ledger is kept on Unix only")

func openGiven(string) (*os.File, error) { return nil, errNotUnix }

func openRead(path string) (*os.File, error) { return os.Open(path) }

func privateDir(string) error { return errNotUnix }
