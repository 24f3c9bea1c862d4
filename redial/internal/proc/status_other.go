//go:build !linux

package proc

// Dying is Linux only: elsewhere a process is known dead once its exit
// is reported.
func Dying(int) (string, bool) { return "", false }
