package procfs

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// TestStatusNamesItsProcess: a Status reads its process through the file
// held open, alive, a zombie (waited for with waitid), and once reaped
// gone by the kernel's word (ESRCH through the file, whoever has the pid
// since); closed, by pid.
func TestStatusNamesItsProcess(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Skip(err)
	}
	s := OpenStatus(cmd.Process.Pid)
	defer s.Close()
	if s.f == nil {
		t.Fatal("the status of a child was not opened")
	}
	if how, ok := s.Dying(); ok {
		t.Fatalf("a sleeping child: Dying = %q", how)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitZombie(t, cmd.Process.Pid)
	if data, err := ReadFromStart(s.f); err != nil || !bytes.Contains(data, []byte("\nState:\tZ")) {
		t.Errorf("a zombie's status, read through the file: %v, %q; want State Z", err, data)
	}
	if how, ok := s.Dying(); !ok {
		t.Errorf("a SIGKILLed child, a zombie: Dying = %q, %v; want dying", how, ok)
	}
	_ = cmd.Wait()
	if _, err := ReadFromStart(s.f); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("a read of a reaped process's status: %v, want ESRCH", err)
	}
	if how, ok := s.Dying(); !ok || how != "gone" {
		t.Errorf("reaped: Dying = %q, %v; want gone", how, ok)
	}
	s.Close()
	if how, ok := s.Dying(); !ok || how != "gone" {
		t.Errorf("reaped, the file closed: Dying = %q, %v; want gone", how, ok)
	}
	if how, ok := OpenStatus(1 << 30).Dying(); !ok || how != "gone" {
		t.Errorf("no such pid: Dying = %q, %v; want gone", how, ok)
	}
}

// TestReadFromStart reads a file longer than its first buffer, twice
// through one descriptor.
func TestReadFromStart(t *testing.T) {
	want := bytes.Repeat([]byte("oom_kill 0\n"), 700)
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, want, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for i := range 2 {
		got, err := ReadFromStart(f)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("read %d: %d bytes, %v; want %d", i, len(got), err, len(want))
		}
	}
}

// waitZombie waits until the child pid has exited, without reaping it.
func waitZombie(t *testing.T, pid int) {
	t.Helper()
	for {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if err == nil {
			return
		}
		if !errors.Is(err, unix.EINTR) {
			t.Fatalf("waitid %d: %v", pid, err)
		}
	}
}
