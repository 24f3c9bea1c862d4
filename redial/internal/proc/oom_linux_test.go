package proc

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestCgroupOOMFiles: the files that hold the OOM-kill count of the memory
// cgroup /proc/<pid>/cgroup names, cgroup v2's first.
func TestCgroupOOMFiles(t *testing.T) {
	for _, c := range []struct {
		name, self string
		want       []string
	}{
		{"v2", "0::/system.slice/host.service\n", []string{"/cg/system.slice/host.service/memory.events"}},
		{"v1", "5:devices:/x\n4:memory:/process_api/35eb\n3:cpu,cpuacct:/y\n", []string{"/cg/memory/process_api/35eb/memory.oom_control"}},
		{"hybrid", "9:name=systemd:/\n4:memory:/a\n0::/b\n", []string{"/cg/b/memory.events", "/cg/memory/a/memory.oom_control"}},
		{"v1, memory with other controllers", "4:cpu,memory:/a\n", []string{"/cg/memory/a/memory.oom_control"}},
		{"no memory controller", "3:cpu:/a\n", nil},
		{"garbage", "nonsense\n\n", nil},
	} {
		if got := cgroupOOMFiles(c.self, "/cg"); !slices.Equal(got, c.want) {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

// TestOOMCountSince: the count read when the plugin started, against the
// count read when it was reaped (injected as the file's text), through the
// file kept open since the start.
func TestOOMCountSince(t *testing.T) {
	path := filepath.Join(t.TempDir(), "memory.events")
	write := func(text string) {
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	const events = "low 0\nhigh 0\nmax 4\noom 2\noom_kill %s\noom_group_kill 0\n"
	for _, r := range []struct {
		name, text string // "" closes the file under the count: unreadable
		want       evidence
	}{
		{"unchanged", strings.Replace(events, "%s", "2", 1), oomNone},
		{"one more", strings.Replace(events, "%s", "3", 1), oomCounted},
		{"went back", strings.Replace(events, "%s", "0", 1), oomUnknown},
		{"no oom_kill line", "oom 3\noom_group_kill 1\n", oomUnknown},
		{"not a number", "oom_kill x\n", oomUnknown},
		{"v1 oom_control", "oom_kill_disable 0\nunder_oom 0\noom_kill 5\n", oomCounted},
		{"longer than a read", strings.Repeat("pgfault 1\n", 600) + "oom_kill 3\n", oomCounted},
		{"unreadable", "", oomUnknown},
	} {
		write(strings.Replace(events, "%s", "2", 1))
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		if n, ok := readOOMKills(f); !ok || n != 2 {
			t.Fatalf("%s: readOOMKills: %d, %v; want 2, true", r.name, n, ok)
		}
		c := oomCount{f: f, n: 2}
		if r.text == "" {
			_ = f.Close()
		} else {
			write(r.text) // the same file, rewritten in place
		}
		if got := c.since(); got != r.want {
			t.Errorf("%s: %d, want %d", r.name, got, r.want)
		}
		if c.f != nil {
			t.Errorf("%s: since kept the file open", r.name)
		}
		_ = f.Close()
	}
	if got := (&oomCount{}).since(); got != oomUnknown {
		t.Errorf("no count read at start: %d, want oomUnknown", got)
	}
}

// TestOOMCountOfCgroupFD: a Cmd that starts its plugin in a cgroup of its
// own (UseCgroupFD) is judged by that cgroup's count.
func TestOOMCountOfCgroupFD(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "memory.events"), []byte("oom 1\noom_kill 7\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	d, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	cmd := exec.Command("sleep")
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: int(d.Fd())}
	c := oomCountFor(cmd)
	defer c.close()
	if c.f == nil || c.f.Name() != filepath.Join(dir, "memory.events") || c.n != 7 {
		t.Errorf("count %+v, want 7 in %s/memory.events", c, dir)
	}
}

// TestExternalSIGKILLIsNoOOMKill: a plugin SIGKILLed by another process,
// with no OOM kill counted meanwhile, did not end by its own doing; one that
// exits by itself did.
func TestExternalSIGKILLIsNoOOMKill(t *testing.T) {
	c := oomCountFor(exec.Command("sleep"))
	found := c.f != nil
	c.close()
	if !found {
		t.Skip("no count of OOM kills readable here")
	}
	wait := func(p *Process) Exit {
		t.Helper()
		select {
		case <-p.Done():
		case <-time.After(10 * time.Second):
			t.Fatal("not reaped in 10s")
		}
		e, _ := p.Exit()
		return e
	}
	p, err := startClosed(exec.Command("sleep", "60"))
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(p.PID(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	e := wait(p)
	if e.Signal != syscall.SIGKILL || e.OOMKilled || e.SelfInflicted {
		t.Errorf("%v: OOMKilled %v, SelfInflicted %v; want SIGKILL, false, false (unless the host OOM-killed something meanwhile)", e, e.OOMKilled, e.SelfInflicted)
	}
	if strings.Contains(e.String(), "oom") {
		t.Errorf("%q names an OOM kill", e)
	}
	p, err = startClosed(exec.Command("sh", "-c", "exit 2"))
	if err != nil {
		t.Fatal(err)
	}
	if e := wait(p); e.Code != 2 || !e.SelfInflicted {
		t.Errorf("%v: SelfInflicted %v, want true", e, e.SelfInflicted)
	}
	oom := New(42, nil)
	oom.report(Exit{PID: 42, Code: -1, Signal: syscall.SIGKILL}, nil, oomCounted)
	if e, _ := oom.Exit(); !e.OOMKilled || !e.SelfInflicted || e.String() != "pid 42 killed by signal 9 (killed), oom-killed" {
		t.Errorf("an OOM kill: %q, OOMKilled %v, SelfInflicted %v", e, e.OOMKilled, e.SelfInflicted)
	}
}

// startClosed starts cmd as Start does, its pipes closed at once.
func startClosed(cmd *exec.Cmd) (*Process, error) {
	p, stdout, stderr, err := Start(cmd)
	if err != nil {
		return nil, err
	}
	_, _ = stdout.Close(), stderr.Close()
	return p, nil
}

// TestOOMCountOfARemovedCgroup: the count of a memory cgroup removed
// before the reap, and made again at the same path, cannot be read again:
// the file held open names the removed group (ENODEV), never the new one,
// whose count says nothing of the plugin. Skipped where no memory cgroup
// can be made.
func TestOOMCountOfARemovedCgroup(t *testing.T) {
	self, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Skip(err)
	}
	var dir, file string
	for _, f := range cgroupOOMFiles(string(self), "/sys/fs/cgroup") {
		d, err := os.MkdirTemp(filepath.Dir(f), "respawn-oom-test-")
		if err != nil {
			continue
		}
		if _, err := os.Stat(filepath.Join(d, filepath.Base(f))); err == nil {
			dir, file = d, filepath.Join(d, filepath.Base(f))
			break
		}
		_ = os.Remove(d)
	}
	if dir == "" {
		t.Skip("no memory cgroup can be made here")
	}
	t.Cleanup(func() { _ = os.Remove(dir) })
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	n, ok := readOOMKills(f)
	if !ok {
		t.Fatalf("%s: no oom_kill count", file)
	}
	c := oomCount{f: f, n: n}
	defer c.close()
	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if got := c.since(); got != oomUnknown {
		t.Errorf("the count of a removed cgroup, made again: %d, want oomUnknown", got)
	}
}
