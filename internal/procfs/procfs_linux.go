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
// /proc/<pid>/status, and a kill(pid, 0) if that cannot be read. A
// process is its thread group: a leader that has exited (pthread_exit in
// its main thread) while other threads run is a zombie that lives, and
// the kernel reaps it only once they have all exited; it is dying only
// when each of its other threads has exited or has a SIGKILL pending (read
// from /proc/<pid>/task/*/status). A pid reused since its reap can only
// make a dead process look alive, which its exit, once reported, corrects.
func Dying(pid int) (how string, ok bool) {
	data, err := status(pid)
	if err != nil {
		if errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
			return "gone", true
		}
		return "", false
	}
	return dyingOf(pid, data)
}

// dyingOf is [Dying] of process pid whose status file says data.
func dyingOf(pid int, data []byte) (how string, ok bool) {
	switch t := parseTask(data); {
	case t.killed:
		return "with a SIGKILL pending", true
	case t.exited && (t.threads <= 1 || !threadsLive(pid)):
		return "a zombie", true
	}
	return "", false
}

// Exited reports whether pid has exited: gone from /proc, or a zombie
// whose threads have all exited (a zombie leader whose other threads still
// run is alive). A process with a SIGKILL pending is dying, not exited:
// see [Dying].
func Exited(pid int) bool {
	data, err := status(pid)
	if err != nil {
		return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
	}
	t := parseTask(data)
	return t.exited && (t.threads <= 1 || !threadsLive(pid))
}

// task is what a /proc/<pid>/status, or a thread's
// /proc/<pid>/task/<tid>/status, says of a thread's death.
type task struct {
	exited  bool // State Z (zombie) or X (dead)
	killed  bool // a SIGKILL pending, for the thread (SigPnd) or its process (ShdPnd)
	threads int  // the Threads line: the threads of its group not yet released
}

// sigkillBit is SIGKILL's bit in the signal masks of /proc/<pid>/status.
const sigkillBit = 1 << (syscall.SIGKILL - 1)

// parseTask reads a status file's State, Threads, SigPnd and ShdPnd lines.
func parseTask(status []byte) task {
	var t task
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		key, val, ok := bytes.Cut(sc.Bytes(), []byte(":"))
		if !ok {
			continue
		}
		val = bytes.TrimSpace(val)
		switch string(key) {
		case "State":
			t.exited = len(val) > 0 && (val[0] == 'Z' || val[0] == 'X')
		case "Threads":
			t.threads, _ = strconv.Atoi(string(val))
		case "SigPnd", "ShdPnd":
			if mask, err := strconv.ParseUint(string(val), 16, 64); err == nil && mask&sigkillBit != 0 {
				t.killed = true
			}
		}
	}
	return t
}

// threadsLive reports whether a thread of process pid other than its
// leader runs on: it has not exited and has no SIGKILL pending. A thread
// list that cannot be read, but for a process already reaped, counts as
// live: a process is never taken for dead on no evidence.
func threadsLive(pid int) bool {
	entries, err := os.ReadDir(dir(pid) + "/task")
	if err != nil {
		return !errors.Is(err, os.ErrNotExist)
	}
	leader := strconv.Itoa(pid)
	for _, e := range entries {
		if e.Name() == leader {
			continue
		}
		data, err := os.ReadFile(dir(pid) + "/task/" + e.Name() + "/status")
		if errors.Is(err, os.ErrNotExist) {
			continue // exited and released since the listing
		}
		if err != nil {
			return true
		}
		if t := parseTask(data); !t.exited && !t.killed {
			return true
		}
	}
	return false
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
