//go:build !linux

package health

// sample is what the kernel says of a plugin's process; elsewhere than on
// Linux the Watcher reads nothing, and judges by the checks alone.
type sample struct {
	ok      bool
	stopped bool
	cpu     uint64
}

func sampleProcess(int) sample { return sample{} }

func runnable(int) bool { return false }
