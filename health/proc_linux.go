package health

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
)

// sample is what the kernel says of a plugin's process at one moment: the
// evidence the Watcher weighs when a check goes unanswered.
type sample struct {
	ok      bool   // the process could be read
	stopped bool   // its state is T: stopped by a signal (SIGSTOP, SIGTSTP)
	cpu     uint64 // user + system time of all its threads, in clock ticks
}

// sampleProcess reads /proc/<pid>/stat. It costs one small read; a process
// that cannot be read gives the zero sample, which is no evidence.
func sampleProcess(pid int) sample {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return sample{}
	}
	st, ok := parseStat(data)
	if !ok {
		return sample{}
	}
	return sample{ok: true, stopped: st.state == 'T', cpu: st.utime + st.stime}
}

// runnable reports whether a thread of process pid is running or waiting
// for a CPU (state R): a process the scheduler has not given a CPU yet is
// slow, not hung. It reads /proc/<pid>/task/*/stat; the main thread alone
// says little of a Go process, whose work runs on other threads.
func runnable(pid int) bool {
	dir := "/proc/" + strconv.Itoa(pid) + "/task"
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, t := range tasks {
		data, err := os.ReadFile(filepath.Join(dir, t.Name(), "stat"))
		if err != nil {
			continue
		}
		if st, ok := parseStat(data); ok && st.state == 'R' {
			return true
		}
	}
	return false
}

type stat struct {
	state        byte
	utime, stime uint64
}

// parseStat reads the state (field 3), utime (14) and stime (15) of a
// /proc/<pid>/stat line. The command name (field 2) is in parentheses and
// may itself hold spaces and parentheses, so the fields are counted from
// the last ')'.
func parseStat(data []byte) (stat, bool) {
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return stat{}, false
	}
	f := bytes.Fields(data[i+1:]) // f[0] is field 3
	if len(f) < 13 || len(f[0]) != 1 {
		return stat{}, false
	}
	ut, err1 := strconv.ParseUint(string(f[11]), 10, 64)
	st, err2 := strconv.ParseUint(string(f[12]), 10, 64)
	if err1 != nil || err2 != nil {
		return stat{}, false
	}
	return stat{state: f[0][0], utime: ut, stime: st}, true
}
