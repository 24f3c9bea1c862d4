package proc

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// frozenCgroup makes a cgroup v2 group, frozen, for the test, and returns
// an open descriptor of its directory for SysProcAttr.CgroupFD, and a func
// that thaws it. A child forked into it (clone3 CLONE_INTO_CGROUP) stops
// before it runs a single instruction, as one whose binary sits on a hung
// mount stops in its exec: the fork does not return until it is thawed.
// The test is skipped where no such group can be made (no cgroup v2
// mounted, or no right to write it).
func frozenCgroup(t *testing.T) (fd int, thaw func()) {
	t.Helper()
	var root string
	for _, dir := range []string{"/sys/fs/cgroup", "/sys/fs/cgroup/unified"} {
		if isCgroup2(dir) {
			root = dir
			break
		}
	}
	if root == "" {
		t.Skip("no cgroup v2 hierarchy")
	}
	dir, err := os.MkdirTemp(root, "respawn-launcher-test-")
	if err != nil {
		t.Skipf("cannot make a cgroup: %v", err)
	}
	t.Cleanup(func() { _ = os.Remove(dir) }) // once its processes are reaped
	freeze := func(v string) error { return os.WriteFile(filepath.Join(dir, "cgroup.freeze"), []byte(v), 0) }
	if err := freeze("1"); err != nil {
		t.Skipf("cannot freeze a cgroup: %v", err)
	}
	thaw = func() {
		if err := freeze("0"); err != nil {
			t.Errorf("thaw: %v", err)
		}
	}
	t.Cleanup(thaw)
	f, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	return int(f.Fd()), thaw
}

// isCgroup2 reports whether dir is the root of a cgroup v2 hierarchy.
func isCgroup2(dir string) bool {
	var st syscall.Statfs_t
	const cgroup2Magic = 0x63677270
	return syscall.Statfs(dir, &st) == nil && st.Type == cgroup2Magic
}

// inCgroup waits, boundedly, until a process is in the cgroup whose
// directory fd is: the blocked fork has its child.
func inCgroup(t *testing.T, fd int) {
	t.Helper()
	dir, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		procs, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
		if err != nil {
			t.Fatal(err)
		}
		if len(bytes.TrimSpace(procs)) > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the frozen launch never made its child")
		}
		time.Sleep(5 * time.Millisecond) // polling: the cgroup says nothing of a child it gains while frozen
	}
}

// started is the outcome of one Start, run on a goroutine.
type started struct {
	p   *Process
	err error
}

// startAsync runs Start(cmd) on a goroutine of its own.
func startAsync(cmd *exec.Cmd) <-chan started {
	ch := make(chan started, 1)
	go func() {
		p, out, errp, err := Start(cmd)
		if err == nil {
			_, _ = out.Close(), errp.Close()
		}
		ch <- started{p, err}
	}()
	return ch
}

// A launch whose fork does not return (its child frozen before it runs,
// as a binary on a hung NFS or FUSE mount holds it in its exec) does not
// delay another launch: each launch in flight forks from a thread of its
// own. The garbage collector is off while the fork is blocked: Go stops
// the world for a collection, and a thread blocked in a vfork cannot be
// stopped, so a collection would wait for the blocked fork (the whole
// process would), as it does for any os/exec start.
func TestBlockedLaunchDoesNotDelayAnother(t *testing.T) {
	fd, thaw := frozenCgroup(t)
	defer debug.SetGCPercent(debug.SetGCPercent(-1))

	frozen := exec.Command("/bin/true")
	frozen.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: fd}
	blocked := startAsync(frozen)
	inCgroup(t, fd)

	began := time.Now()
	other := startAsync(exec.Command("/bin/true"))
	var got started
	select {
	case got = <-other:
	case <-time.After(10 * time.Second):
		t.Error("a launch waited for another's blocked fork")
		thaw()
		got = <-other
	}
	t.Logf("another launch took %v while one fork was held", time.Since(began))
	if got.err != nil {
		t.Fatalf("start: %v", got.err)
	}
	thaw()
	b := <-blocked
	for _, s := range []started{got, b} {
		if s.err != nil {
			t.Errorf("start: %v", s.err)
			continue
		}
		select {
		case <-s.p.Done():
		case <-time.After(10 * time.Second):
			t.Errorf("pid %d: no exit", s.p.PID())
			_ = s.p.Kill()
			<-s.p.Done()
		}
	}
}

// The launcher rules, without processes: a launch takes a launcher that is
// not forking, made if none is; a launcher lives while a child it forked
// is unreaped or while it forks, and ends once neither holds.
func TestLauncherLivesWhileItHasAChild(t *testing.T) {
	var p launcherPool
	ended := func(l *launcher) bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return l.ended
	}
	a := p.take()
	b := p.take()
	if a == b {
		t.Fatal("two launches in flight share a launcher")
	}
	a.put(true) // a forked a child
	if c := p.take(); c != a {
		t.Fatal("a launch made a launcher while one that is not forking waits")
	}
	a.release() // a's child is reaped while a forks another
	if ended(a) {
		t.Fatal("a launcher that is forking ended")
	}
	a.put(true)
	b.put(false) // b's fork failed: it has no child
	if !ended(b) {
		t.Error("a launcher with no child and no fork lives on")
	}
	if ended(a) {
		t.Fatal("a launcher with an unreaped child ended")
	}
	a.release()
	if !ended(a) {
		t.Error("a launcher whose children are all reaped lives on")
	}
	if len(p.idle) != 0 {
		t.Errorf("%d launchers left waiting, want 0", len(p.idle))
	}
}
