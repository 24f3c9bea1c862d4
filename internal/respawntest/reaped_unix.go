//go:build unix

package respawntest

import (
	"errors"
	"os"
	"strconv"
	"syscall"
	"testing"
)

// AssertReaped checks that pid is gone: not running and not a zombie.
func AssertReaped(tb testing.TB, pid int) {
	tb.Helper()
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		tb.Errorf("kill(%d, 0) = %v, want ESRCH", pid, err)
	}
	if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); !errors.Is(err, os.ErrNotExist) {
		tb.Errorf("/proc/%d: %v, want it absent (no zombie)", pid, err)
	}
}
