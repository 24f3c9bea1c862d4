//go:build !linux

package health_test

import "testing"

// stop is only implemented on Linux, where it can wait for the stop to take
// effect; elsewhere the tests that need it are skipped.
func stop(tb testing.TB, _ int) {
	tb.Skip("waiting for SIGSTOP to take effect needs waitid(2) as on Linux")
}
