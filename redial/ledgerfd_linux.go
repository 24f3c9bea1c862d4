package redial

import (
	"os"
	"path/filepath"
	"strconv"
)

// holdsOpen reports whether the process pid has the file made, named
// name, open: a process that opened its ledger and then replaced its
// program (exec), which closed it, no longer keeps the ledger it opened.
// From /proc/<pid>/fd; false if that cannot be read. Only a descriptor
// whose link ends in name is stat'd (to compare inodes), so that a file
// the plugin holds on a mount that hangs does not hang the host.
func holdsOpen(pid int, name string, made os.FileInfo) bool {
	dir := "/proc/" + strconv.Itoa(pid) + "/fd/"
	d, err := os.Open(dir)
	if err != nil {
		return false
	}
	fds, _ := d.Readdirnames(-1)
	_ = d.Close()
	for _, fd := range fds {
		if link, err := os.Readlink(dir + fd); err != nil || filepath.Base(link) != name {
			continue
		}
		if st, err := os.Stat(dir + fd); err == nil && os.SameFile(st, made) {
			return true
		}
	}
	return false
}
