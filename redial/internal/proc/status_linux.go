package proc

import (
	"bufio"
	"bytes"
	"errors"
	"strconv"
	"syscall"
)

// Dying says whether process pid is already dead or dying, and how: gone
// (reaped), a zombie, or with a SIGKILL pending (sent, not yet acted on:
// its exit is under way, as in the instant after an OOM kill). It asks the
// kernel, not the plugin: one read of /proc/<pid>/status, and a kill(pid,
// 0) if that cannot be read. A pid reused since its reap can only make a
// dead process look alive, which its exit, once reported, corrects.
func Dying(pid int) (string, bool) {
	data, err := procStatus(pid)
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
