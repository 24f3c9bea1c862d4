package respawntest

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

// OpenFDs counts this process's open file descriptors, for leak checks.
func OpenFDs(tb testing.TB) int {
	tb.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		tb.Fatal(err)
	}
	return len(entries) - 1 // ReadDir's own
}

// Children lists the pids whose parent is this process, for leak checks.
func Children(tb testing.TB) []int {
	tb.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		tb.Fatal(err)
	}
	self := strconv.Itoa(os.Getpid())
	var kids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // gone meanwhile
		}
		// pid (comm) state ppid ...
		i := strings.LastIndexByte(string(stat), ')')
		if f := strings.Fields(string(stat[i+1:])); i > 0 && len(f) > 1 && f[1] == self {
			kids = append(kids, pid)
		}
	}
	return kids
}
