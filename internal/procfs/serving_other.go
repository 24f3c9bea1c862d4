//go:build !linux

package procfs

// Serving knows nothing outside Linux: always nil.
func Serving(int) []int { return nil }

// ReadStatIn knows nothing outside Linux: ok is always false.
func ReadStatIn(int, int) (Stat, bool) { return Stat{}, false }
