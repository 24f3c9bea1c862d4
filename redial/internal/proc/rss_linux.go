package proc

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
)

// ResidentBytes returns the resident memory of process pid, from the VmRSS
// line of /proc/<pid>/status.
func ResidentBytes(pid int) (uint64, error) {
	data, err := procStatus(pid)
	if err != nil {
		return 0, err
	}
	return parseVmRSS(data)
}

// procStatus reads /proc/<pid>/status.
func procStatus(pid int) ([]byte, error) {
	return os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
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
			return 0, fmt.Errorf("redial: VmRSS line %q: want \"<n> kB\"", sc.Bytes())
		}
		kb, err := strconv.ParseUint(string(f[0]), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("redial: VmRSS line %q: %w", sc.Bytes(), err)
		}
		return kb * 1024, nil
	}
	return 0, fmt.Errorf("redial: no VmRSS line (a kernel thread, or a zombie)")
}
