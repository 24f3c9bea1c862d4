package procfs

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"strings"
)

// Serving returns the processes that serve for the plugin whose process
// is pid: those that hold a listening socket, pid first. A plugin
// exec'd directly serves from pid itself, and only its own file
// descriptors are read. A plugin started behind a shell (sh -c, as
// go-plugin's examples do) serves from a child of that shell: when pid
// holds no listening socket and leads a process group, its group's
// members are read. The listening sockets are those of pid's network
// namespace: unix ones first (go-plugin's on Unix), then tcp and tcp6,
// whose tables the kernel lists slowly (milliseconds). nil when none is
// found: no socket, a process that cannot be read, or a listener held
// outside the group.
func Serving(pid int) []int {
	if pid <= 0 {
		return nil
	}
	var members []int
	membersRead := false
	net := dir(pid) + "/net/"
	for _, tables := range [][]socketTable{
		{{net + "unix", unixListening}},
		{{net + "tcp", tcpListening}, {net + "tcp6", tcpListening}},
	} {
		listening := map[uint64]bool{}
		for _, t := range tables {
			t.read(listening)
		}
		if len(listening) == 0 {
			continue
		}
		if holdsAny(pid, listening) {
			return []int{pid}
		}
		if !membersRead {
			membersRead = true
			if pgrp, ok := readPgrp(pid); ok && pgrp == pid {
				members = groupMembers(pid)
			} // else not a group leader: it has no group of its own to read
		}
		var serving []int
		for _, m := range members {
			if holdsAny(m, listening) {
				serving = append(serving, m)
			}
		}
		if len(serving) > 0 {
			return serving
		}
	}
	return nil
}

// ReadStatIn is [ReadStat] of a process that must still be in process
// group pgid: a pid read again after its process may have been reaped
// (by a shell, not by us) and reused names another process, in another
// group. ok is false then.
func ReadStatIn(pid, pgid int) (st Stat, ok bool) {
	data, err := os.ReadFile(dir(pid) + "/stat")
	if err != nil {
		return Stat{}, false
	}
	if g, ok := parsePgrp(data); !ok || g != pgid {
		return Stat{}, false
	}
	return parseStat(data)
}

// readPgrp reads the process group of process pid.
func readPgrp(pid int) (int, bool) {
	data, err := os.ReadFile(dir(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	return parsePgrp(data)
}

// parsePgrp reads the process group (field 5) of a /proc/<pid>/stat line,
// counting the fields from the last ')' as parseStat does.
func parsePgrp(data []byte) (int, bool) {
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return 0, false
	}
	f := bytes.Fields(data[i+1:]) // f[0] is field 3
	if len(f) < 3 {
		return 0, false
	}
	g, err := strconv.Atoi(string(f[2]))
	return g, err == nil
}

// groupMembers returns the processes of group pgid other than its leader,
// from one pass over /proc.
func groupMembers(pgid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var members []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == pgid {
			continue
		}
		if g, ok := readPgrp(pid); ok && g == pgid {
			members = append(members, pid)
		}
	}
	return members
}

// holdsAny reports whether process pid has one of the sockets whose inodes
// are in inodes open.
func holdsAny(pid int, inodes map[uint64]bool) bool {
	fdDir := dir(pid) + "/fd/"
	fds, err := os.ReadDir(fdDir)
	if err != nil {
		return false
	}
	for _, fd := range fds {
		target, err := os.Readlink(fdDir + fd.Name())
		if err != nil {
			continue
		}
		rest, ok := strings.CutPrefix(target, "socket:[")
		if !ok {
			continue
		}
		if n, err := strconv.ParseUint(strings.TrimSuffix(rest, "]"), 10, 64); err == nil && inodes[n] {
			return true
		}
	}
	return false
}

// socketTable is a table of sockets under /proc/<pid>/net, and how to
// read the inode of a listening one from one of its lines.
type socketTable struct {
	path      string
	listening func(fields []string) (inode uint64, ok bool)
}

// read adds to inodes the inode of each listening socket of t.
func (t socketTable) read(inodes map[uint64]bool) {
	f, err := os.Open(t.path)
	if err != nil {
		return
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Scan() // the header
	for sc.Scan() {
		if n, ok := t.listening(strings.Fields(sc.Text())); ok {
			inodes[n] = true
		}
	}
}

// soAcceptCon is __SO_ACCEPTCON, the Flags bit of /proc/net/unix for a
// socket that listens.
const soAcceptCon = 1 << 16

// unixListening reads a line of /proc/net/unix: Num RefCount Protocol
// Flags Type St Inode [Path].
func unixListening(f []string) (uint64, bool) {
	if len(f) < 7 {
		return 0, false
	}
	flags, err := strconv.ParseUint(f[3], 16, 64)
	if err != nil || flags&soAcceptCon == 0 {
		return 0, false
	}
	n, err := strconv.ParseUint(f[6], 10, 64)
	return n, err == nil
}

// tcpListen is TCP_LISTEN, the st column of /proc/net/tcp{,6}.
const tcpListen = "0A"

// tcpListening reads a line of /proc/net/tcp or tcp6: sl local_address
// rem_address st tx:rx tr:when retrnsmt uid timeout inode ...
func tcpListening(f []string) (uint64, bool) {
	if len(f) < 10 || f[3] != tcpListen {
		return 0, false
	}
	n, err := strconv.ParseUint(f[9], 10, 64)
	return n, err == nil
}
