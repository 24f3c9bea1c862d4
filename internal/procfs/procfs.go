// Package procfs asks the kernel about a plugin's process, without a round
// trip to the plugin: its scheduling state and CPU time, whether its death
// is under way, its resident memory. On Linux it reads /proc/<pid>/stat,
// /proc/<pid>/task/*/stat and /proc/<pid>/status, one small read each;
// elsewhere it knows nothing, and says so: the zero [Stat], not dying, an
// error for the memory.
//
// A pid names a process only until that process is reaped: callers read
// while the process is theirs and unreaped, or accept that a reused pid
// can make a dead process look alive. A [Status], opened while the pid
// names the process, goes on naming it, and no other, until it is reaped.
package procfs

// Stat is what /proc/<pid>/stat says of a process at one moment.
type Stat struct {
	// State is the process's state letter: R running or runnable, S
	// sleeping, D in uninterruptible sleep, T stopped by a signal (SIGSTOP,
	// SIGTSTP), t traced, Z zombie, X dead.
	State byte
	// CPU is the user + system time of all its threads, in clock ticks.
	CPU uint64
}
