//go:build !linux

package procfs

// Status knows nothing outside Linux, as [Dying].
type Status struct{}

// OpenStatus opens nothing outside Linux.
func OpenStatus(int) *Status { return &Status{} }

// Dying knows nothing outside Linux: a process is known dead once its
// exit is reported.
func (*Status) Dying() (string, bool) { return "", false }

// Close does nothing outside Linux.
func (*Status) Close() {}
