package procfs

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// dir returns /proc/<pid>.
func dir(pid int) string { return "/proc/" + strconv.Itoa(pid) }

// ReadStat reads /proc/<pid>/stat. ok is false when the process cannot be
// read (it is gone) or the line cannot be parsed: no evidence either way.
func ReadStat(pid int) (st Stat, ok bool) {
	data, err := os.ReadFile(dir(pid) + "/stat")
	if err != nil {
		return Stat{}, false
	}
	return parseStat(data)
}

// Runnable reports whether a thread of process pid is running or waiting
// for a CPU (state R): a process the scheduler has not given a CPU yet is
// slow, not hung. It reads /proc/<pid>/task/*/stat; the main thread alone
// says little of a Go process, whose work runs on other threads.
func Runnable(pid int) bool {
	tdir := dir(pid) + "/task"
	tasks, err := os.ReadDir(tdir)
	if err != nil {
		return false
	}
	for _, t := range tasks {
		data, err := os.ReadFile(filepath.Join(tdir, t.Name(), "stat"))
		if err != nil {
			continue
		}
		if st, ok := parseStat(data); ok && st.State == 'R' {
			return true
		}
	}
	return false
}

// parseStat reads the state (field 3), utime (14) and stime (15) of a
// /proc/<pid>/stat line. The command name (field 2) is in parentheses and
// may itself hold spaces and parentheses, so the fields are counted from
// the last ')'.
func parseStat(data []byte) (Stat, bool) {
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return Stat{}, false
	}
	f := bytes.Fields(data[i+1:]) // f[0] is field 3
	if len(f) < 13 || len(f[0]) != 1 {
		return Stat{}, false
	}
	ut, err1 := strconv.ParseUint(string(f[11]), 10, 64)
	st, err2 := strconv.ParseUint(string(f[12]), 10, 64)
	if err1 != nil || err2 != nil {
		return Stat{}, false
	}
	return Stat{State: f[0][0], CPU: ut + st}, true
}

// status reads /proc/<pid>/status.
func status(pid int) ([]byte, error) { return os.ReadFile(dir(pid) + "/status") }

// Dying says whether process pid is already dead or dying, and how: gone
// (reaped), a zombie, or with a SIGKILL pending (sent, not yet acted on:
// its exit is under way, as in the instant after an OOM kill). One read of
// /proc/<pid>/status, and a kill(pid, 0) if that cannot be read. A pid
// reused since its reap can only make a dead process look alive, which its
// exit, once reported, corrects.
func Dying(pid int) (how string, ok bool) {
	data, err := status(pid)
	if err != nil {
		if errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
			return "gone", true
		}
		return "", false
	}
	return parseDying(data)
}

// sigkillBit is SIGKILL's bit in the signal masks of /proc/<pid>/status.
const sigkillBit = 1 << (syscall.SIGKILL - 1)

// parseDying reads Dying's answer from a /proc/<pid>/status: its State
// line, and the SIGKILL bit of the thread's (SigPnd) and the process's
// (ShdPnd) pending signals.
func parseDying(status []byte) (string, bool) {
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		key, val, ok := bytes.Cut(sc.Bytes(), []byte(":"))
		if !ok {
			continue
		}
		val = bytes.TrimSpace(val)
		switch string(key) {
		case "State":
			if len(val) > 0 && (val[0] == 'Z' || val[0] == 'X') {
				return "a zombie", true
			}
		case "SigPnd", "ShdPnd":
			if mask, err := strconv.ParseUint(string(val), 16, 64); err == nil && mask&sigkillBit != 0 {
				return "with a SIGKILL pending", true
			}
		}
	}
	return "", false
}

// ResidentBytes returns the resident memory of process pid, from the VmRSS
// line of /proc/<pid>/status.
func ResidentBytes(pid int) (uint64, error) {
	data, err := status(pid)
	if err != nil {
		return 0, err
	}
	return parseVmRSS(data)
}

// parseVmRSS returns the VmRSS of a /proc/<pid>/status in bytes.
func parseVmRSS(status []byte) (uint64, error) {
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		rest, ok := bytes.CutPrefix(sc.Bytes(), []byte("VmRSS:"))
		if !ok {
			continue
		}
		f := bytes.Fields(rest)
		if len(f) != 2 || string(f[1]) != "kB" {
			return 0, fmt.Errorf("procfs: VmRSS line %q: want \"<n> kB\"", sc.Bytes())
		}
		kb, err := strconv.ParseUint(string(f[0]), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("procfs: VmRSS line %q: %w", sc.Bytes(), err)
		}
		return kb * 1024, nil
	}
	return 0, fmt.Errorf("procfs: no VmRSS line (a kernel thread, or a zombie)")
}
