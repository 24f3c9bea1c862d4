//go:build unix

package testplugin

import (
	"syscall"
	"time"
)

// ProcessCPU is the CPU time, user and system, of all this process's
// threads, as getrusage(2) counts it.
func ProcessCPU() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, err
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}
