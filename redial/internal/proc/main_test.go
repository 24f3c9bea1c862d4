package proc

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that no test leaves a goroutine behind: the reaper, the
// pipe readers and the launcher threads each start goroutines.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
