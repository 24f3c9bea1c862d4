//go:build !linux

package proc

import "errors"

// errRSSUnavailable: the platform has no way to read a process's resident
// memory that redial knows of.
var errRSSUnavailable = errors.New("redial: resident memory is unavailable on this platform")

// ResidentBytes is unavailable outside Linux: WithRecycle's rss limit is
// ignored there.
func ResidentBytes(int) (uint64, error) { return 0, errRSSUnavailable }
