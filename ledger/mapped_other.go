//go:build !linux

package ledger

import (
	"errors"
	"os"
)

var errNotMapped = errors.New("the ledger is mapped on Linux only")

// mapping: outside Linux, records are written with write(2), and none is
// mapped.
type mapping struct{ size int }

func mapFile(*os.File, string) (*mapping, error) { return nil, nil }

func (*mapping) store(*os.File, string, []byte) (err, broken error) {
	return errNotMapped, errNotMapped
}

func (*mapping) sync(string, int) error { return errNotMapped }

func (*mapping) close() {}
