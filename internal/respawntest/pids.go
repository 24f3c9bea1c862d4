package respawntest

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/grpc-respawn/respawn/internal/procfs"
)

// ReadPID reads the pid a test plugin wrote to file (its -child and
// -setsid-child flags).
func ReadPID(tb testing.TB, file string) int {
	tb.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		tb.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		tb.Fatal(err)
	}
	return pid
}

// WaitDead waits until pid, which is not this process's child, has exited:
// gone from /proc, or a zombie whose threads have all exited
// ([procfs.Exited]). Nothing signals the end of a process that is not
// ours, so it polls every 5ms, for at most [Timeout]. Linux only.
func WaitDead(tb testing.TB, pid int) {
	tb.Helper()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(Timeout)
	for !procfs.Exited(pid) {
		select {
		case <-tick.C:
		case <-deadline:
			tb.Fatalf("pid %d still alive after %v", pid, Timeout)
		}
	}
}
