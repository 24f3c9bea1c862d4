//go:build race

package interceptor_test

// raceEnabled: the race detector makes sync.Pool drop items at random, so
// grpc-go's own allocations per call vary from run to run.
const raceEnabled = true
