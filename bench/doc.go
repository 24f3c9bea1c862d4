// Package bench measures respawn side by side with the alternatives: a plain
// grpc-go client, go-grpc-middleware's retry interceptor, and a
// re-implementation of Velero's restartable plugin process.
//
// The benchmarks live in the _test.go files and only run with -bench; see
// README.md for how to run them and what each one measures. The package
// itself exports nothing; the SVG writer that draws the chaos timeline is
// in internal/timeline.
package bench
