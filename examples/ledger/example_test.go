//go:build unix

package main

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// TestMain makes the test binary the plugin when go-plugin launches it, as
// main does.
func TestMain(m *testing.M) {
	if isPlugin() {
		servePlugin()
		return
	}
	goleak.VerifyTestMain(m)
}

// A go-plugin host whose plugin is SIGKILLed in the middle of deposits,
// which must not run twice: after a deposit completed and before its
// answer was sent, then in its handler after it wrote the deposit, then in
// its handler before. With the ledger, each deposit completes exactly once;
// without it, the first two fail with interceptor.ErrOutcomeUnknown, though
// each ran.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := run(ctx, os.Stdout); err != nil {
		fmt.Println(err)
	}
	// Output:
	// deposit 10: balance 10
	// deposit 20, the plugin is killed after the deposit and before its answer: balance 30 (answered from the dead plugin's ledger; it did not run again)
	// deposit 5, the plugin is killed in its handler after it wrote the deposit: balance 35 (the plugin's resolver found it had taken effect)
	// deposit 7, the plugin is killed in its handler before it wrote the deposit: balance 42 (the plugin's resolver found it had not taken effect, and made it)
	// deposits on file: 4, each once; balance 42; respawns: 3
	// without the host's WithLedger, the same two kills:
	// deposit 20, killed after it: errors.Is(err, interceptor.ErrOutcomeUnknown) = true, yet it ran: deposits on file 1
	// deposit 5, killed in its handler: errors.Is(err, interceptor.ErrOutcomeUnknown) = true, yet it ran: deposits on file 2
}
