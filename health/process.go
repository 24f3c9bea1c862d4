package health

import (
	"github.com/grpc-respawn/respawn/internal/procfs"
	"github.com/grpc-respawn/respawn/redial"
)

// processes are the processes whose state the watcher weighs when a
// check of a plugin goes unanswered: those that serve, which hold its
// listening socket. A plugin exec'd by its hook serves from the process
// the hook reported; one behind a shell (sh -c) from the shell's child,
// whose state, not the waiting shell's, says whether the plugin is
// stopped or busy. Found once per plugin, when its watch begins: a plugin
// is current only once it serves. When no process that listens is found,
// the reported process is judged.
type processes struct {
	pids []int // the serving processes; empty when no process is known
	pgid int   // the group the pids are members of; 0: pids is the reported process alone
}

// servingProcesses finds the processes that serve for g.
func servingProcesses(g *redial.Generation) processes {
	p := g.Process()
	if p == nil || p.PID <= 0 {
		return processes{}
	}
	pids := procfs.Serving(p.PID)
	if len(pids) == 0 || len(pids) == 1 && pids[0] == p.PID {
		return processes{pids: []int{p.PID}}
	}
	return processes{pids: pids, pgid: p.PID}
}

// sample is what the kernel says of a plugin's serving processes at one
// moment: the evidence the watcher weighs when a check goes unanswered.
// ok is false when there is none: no process known, none that can be
// read, or a system other than Linux.
type sample struct {
	ok      bool
	stopped bool   // every process read is stopped by a signal (state T)
	cpu     uint64 // their user + system time, in clock ticks
}

// sample reads the state and CPU time of p's processes; one small read
// each. A member of a group that has left it (its pid reused) is not read.
func (p *processes) sample() sample {
	s := sample{stopped: true}
	for _, pid := range p.pids {
		var st procfs.Stat
		var ok bool
		if p.pgid == 0 {
			st, ok = procfs.ReadStat(pid)
		} else {
			st, ok = procfs.ReadStatIn(pid, p.pgid)
		}
		if !ok {
			continue
		}
		s.ok = true
		s.cpu += st.CPU
		s.stopped = s.stopped && st.State == 'T'
	}
	s.stopped = s.stopped && s.ok
	return s
}

// runnable reports whether a thread of one of p's processes is running
// or waiting for a CPU.
func (p *processes) runnable() bool {
	for _, pid := range p.pids {
		if procfs.Runnable(pid) {
			return true
		}
	}
	return false
}
