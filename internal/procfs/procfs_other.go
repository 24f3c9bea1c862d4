//go:build !linux

package procfs

import "errors"

// ReadStat knows nothing outside Linux: ok is always false.
func ReadStat(int) (Stat, bool) { return Stat{}, false }

// Runnable knows nothing outside Linux: always false.
func Runnable(int) bool { return false }

// Dying knows nothing outside Linux: a process is known dead once its exit
// is reported.
func Dying(int) (string, bool) { return "", false }

// Exited knows nothing outside Linux: always false.
func Exited(int) bool { return false }

// errRSSUnavailable: the platform has no way to read a process's resident
// memory that procfs knows of.
var errRSSUnavailable = errors.New("procfs: resident memory is unavailable on this platform")

// ResidentBytes is unavailable outside Linux.
func ResidentBytes(int) (uint64, error) { return 0, errRSSUnavailable }
