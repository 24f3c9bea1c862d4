//go:build unix

package bench

import "testing"

// benchRecoveryTeardown is BenchmarkRecovery/strategy=teardown where pidfds
// exist (Linux); nil elsewhere.
var benchRecoveryTeardownFunc func(*testing.B)
