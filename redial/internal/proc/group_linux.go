package proc

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/grpc-respawn/respawn/internal/procfs"
)

// exitedUnreaped reports whether the child pid has exited and is not
// reaped yet (a zombie), so that its process group id is still its own. It
// is false for a child that still runs (waitid with WNOHANG then succeeds
// with no child state) and for one the system reaped (SIGCHLD ignored).
func exitedUnreaped(pid int) bool {
	for {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT|unix.WNOHANG, nil)
		if !errors.Is(err, unix.EINTR) {
			return err == nil && info.Signo == int32(unix.SIGCHLD)
		}
	}
}

// waitExited blocks until the child pid has exited, without reaping it: a
// zombie keeps its pid, so its group id cannot be handed out again until
// cmd.Wait reaps it.
func waitExited(pid int) error {
	for {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

// reapGroup reaps the members of process group pgid, just killed with
// their leader, that are children of ours: a host that is a child
// subreaper (prctl PR_SET_CHILD_SUBREAPER) or PID 1 inherits the plugin's
// children when the plugin dies, and would otherwise keep them as zombies.
// It returns once no child of ours is left in the group, at once in any
// other host. The leader is reaped already; while a member, even a zombie,
// is left, the kernel does not hand out the group id again, so each wait
// takes one of the plugin's (the id is reused only once the pid counter
// has wrapped around). A member that cannot die yet (in D state, or
// frozen by a cgroup v1 freezer, where SIGKILL waits for the thaw) holds
// the exit report up for at most reapGroupWait: the rest are reaped in
// the background.
func reapGroup(pgid int) {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-pgid, &ws, syscall.WNOHANG, nil)
		switch {
		case errors.Is(err, syscall.EINTR):
		case err != nil:
			return // ECHILD: none left, at once in a host that is no subreaper
		case pid == 0: // some are still dying
			done := make(chan struct{})
			go func() {
				defer close(done)
				for {
					_, err := syscall.Wait4(-pgid, &ws, 0, nil)
					if err != nil && !errors.Is(err, syscall.EINTR) {
						return
					}
				}
			}()
			t := time.NewTimer(reapGroupWait)
			defer t.Stop()
			select {
			case <-done:
			case <-t.C:
			}
			return
		}
	}
}

// reapGroupWait bounds how long the exit report waits for the plugin's
// killed children to die: SIGKILLed, they die within milliseconds unless
// something holds them.
const reapGroupWait = time.Second

// startCmd starts cmd so that the plugin is SIGKILLed when the host dies,
// however it dies (SIGKILL, the OOM killer, a timeout): cmd gets
// Pdeathsig SIGKILL unless it asks for another signal. Linux sends that
// signal when the thread that forked the child ends, not the process, and
// Go ends a thread whenever a goroutine that locked it (LockOSThread)
// returns: any thread a goroutine of the host may lock could take the
// plugin with it. So the fork runs on a launcher thread of redial's own,
// locked by a goroutine that does nothing else and returns only once no
// child it started is left unreaped. Each launch in flight has a launcher
// of its own, one that is not forking, so that a fork that does not return
// (a child held before its exec: its binary on a hung mount) delays no
// other launch; a launcher whose children are all reaped ends. release
// must be called once the child is reaped.
func startCmd(cmd *exec.Cmd) (release func(), err error) {
	if cmd.SysProcAttr.Pdeathsig == 0 {
		cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	}
	l := launchers.take()
	type result struct {
		err    error
		panicV any // a panic in Start, raised again on the caller's goroutine
	}
	done := make(chan result, 1)
	l.starts <- func() {
		defer func() {
			if v := recover(); v != nil {
				done <- result{panicV: v}
			}
		}()
		done <- result{err: cmd.Start()}
	}
	r := <-done
	if r.panicV != nil || r.err != nil {
		l.put(false)
		if r.panicV != nil {
			panic(r.panicV)
		}
		return nil, r.err
	}
	l.put(true)
	return sync.OnceFunc(l.release), nil
}

// launcher is a locked thread plugins are forked from.
type launcher struct {
	pool   *launcherPool
	starts chan func() // to the launcher's goroutine
	live   int         // children started on it and not yet reaped; under pool.mu
	idle   bool        // not forking now: in pool.idle
	ended  bool        // its thread was let go; under pool.mu
}

// launcherPool holds the launchers that are not forking now and have a
// child to keep alive. The zero pool is empty.
type launcherPool struct {
	mu   sync.Mutex
	idle []*launcher
}

// launchers is the host's pool: every plugin is forked from one of them.
var launchers launcherPool

// take returns a launcher that is not forking, made if none is, for one
// launch.
func (p *launcherPool) take() *launcher {
	p.mu.Lock()
	defer p.mu.Unlock()
	if n := len(p.idle); n > 0 {
		l := p.idle[n-1]
		p.idle = p.idle[:n-1]
		l.idle = false
		return l
	}
	l := &launcher{pool: p, starts: make(chan func())}
	go runLauncher(l.starts)
	return l
}

// put gives l back after a launch, which started a child if ok: l waits
// for the next launch while a child of its is unreaped, and ends otherwise.
func (l *launcher) put(ok bool) {
	l.pool.mu.Lock()
	defer l.pool.mu.Unlock()
	if ok {
		l.live++
	}
	if l.live == 0 {
		l.end()
		return
	}
	l.idle = true
	l.pool.idle = append(l.pool.idle, l)
}

// release forgets one child of l, reaped; the last one lets l's thread
// go, unless it is forking another.
func (l *launcher) release() {
	l.pool.mu.Lock()
	defer l.pool.mu.Unlock()
	if l.live--; l.live > 0 || !l.idle {
		return
	}
	l.idle = false
	l.pool.idle = slices.DeleteFunc(l.pool.idle, func(x *launcher) bool { return x == l })
	l.end()
}

// end lets l's thread go: its goroutine returns, and the runtime ends the
// locked thread. pool.mu is held.
func (l *launcher) end() {
	l.ended = true
	close(l.starts)
}

// runLauncher locks its thread for good and runs the starts it is given:
// when it returns, the runtime ends the thread, once no child of the
// thread is left to be signalled.
func runLauncher(starts <-chan func()) {
	runtime.LockOSThread()
	for start := range starts {
		start()
	}
}

// oomCount is a count of OOM kills that the kernel keeps and that covers a
// plugin, read as it starts. The kernel raises the count before it sends
// its SIGKILL, so once the plugin is reaped the count has moved if the kill
// was the OOM killer's. The file stays open until then: read again through
// it, the count costs a pread from offset 0 and one that finds the end
// (0.5 µs) on the reaper's way to reporting the exit, where opening the
// file again cost 6 to 55 µs.
type oomCount struct {
	f *os.File // holds the count; nil if none could be read, or let go
	n uint64
}

// oomCountFor reads the count of OOM kills that will cover the plugin cmd
// is about to start: its memory cgroup's, the host's unless cmd puts it in
// another (UseCgroupFD), or else the host's whole count.
func oomCountFor(cmd *exec.Cmd) oomCount {
	var files []string
	if a := cmd.SysProcAttr; a != nil && a.UseCgroupFD {
		if dir, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(a.CgroupFD)); err == nil {
			files = append(files, filepath.Join(dir, "memory.events"))
		}
	} else if b, err := os.ReadFile("/proc/self/cgroup"); err == nil {
		files = cgroupOOMFiles(string(b), "/sys/fs/cgroup")
	}
	for _, path := range append(files, "/proc/vmstat") {
		f, err := os.Open(path)
		if err != nil {
			continue
		}
		if n, ok := readOOMKills(f); ok {
			return oomCount{f: f, n: n}
		}
		_ = f.Close()
	}
	return oomCount{}
}

// since says whether the count has moved since c was read: oomUnknown if it
// cannot be read again (its cgroup removed), or went back. It lets go of
// the file.
func (c *oomCount) since() evidence {
	if c.f == nil {
		return oomUnknown
	}
	n, ok := readOOMKills(c.f)
	c.close()
	switch {
	case !ok || n < c.n:
		return oomUnknown
	case n > c.n:
		return oomCounted
	}
	return oomNone
}

// close lets go of the file, if c still holds it.
func (c *oomCount) close() {
	if c.f != nil {
		_ = c.f.Close()
		c.f = nil
	}
}

// cgroupOOMFiles returns the files, under root where the cgroup file
// systems are mounted, that hold the oom_kill count of the memory cgroup
// that self (the text of /proc/<pid>/cgroup) names: cgroup v2's
// memory.events, then cgroup v1's memory.oom_control.
func cgroupOOMFiles(self, root string) []string {
	var files []string
	for line := range strings.SplitSeq(self, "\n") {
		hier, rest, ok := strings.Cut(line, ":")
		ctrls, path, ok2 := strings.Cut(rest, ":")
		switch {
		case !ok || !ok2:
		case hier == "0" && ctrls == "":
			files = append([]string{filepath.Join(root, path, "memory.events")}, files...)
		case slices.Contains(strings.Split(ctrls, ","), "memory"):
			files = append(files, filepath.Join(root, "memory", path, "memory.oom_control"))
		}
	}
	return files
}

// readOOMKills reads the "oom_kill N" line of f from its start
// (memory.events, memory.oom_control and /proc/vmstat all have one).
func readOOMKills(f *os.File) (uint64, bool) {
	b, err := procfs.ReadFromStart(f)
	if err != nil {
		return 0, false
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "oom_kill "); ok {
			n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}
