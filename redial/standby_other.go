//go:build !linux

package redial

// dying is Linux only: elsewhere a spare is known dead once its exit is
// reported.
func dying(int) (string, bool) { return "", false }
