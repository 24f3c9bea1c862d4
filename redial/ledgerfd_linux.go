package redial

import (
	"os"
	"strconv"
)

// holdsOpen reports whether the process pid has the file made open: a
// process that opened its ledger and then replaced its program (exec),
// which closed it, no longer keeps the ledger it opened. From
// /proc/<pid>/fd; false if that cannot be read.
func holdsOpen(pid int, made os.FileInfo) bool {
	dir := "/proc/" + strconv.Itoa(pid) + "/fd/"
	d, err := os.Open(dir)
	if err != nil {
		return false
	}
	names, _ := d.Readdirnames(-1)
	_ = d.Close()
	for _, name := range names {
		if st, err := os.Stat(dir + name); err == nil && os.SameFile(st, made) {
			return true
		}
	}
	return false
}
