package bench

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run if a benchmark left a goroutine behind: every
// Conn, watcher and plugin it starts must be closed when it returns.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
