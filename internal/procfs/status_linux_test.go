package procfs

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestStatusNamesItsProcess: a Status reads its process through the file
// held open, alive, dying, and once reaped gone by the kernel's word
// (ESRCH through the file, whoever has the pid since); closed, by pid.
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
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, ok := s.Dying(); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a SIGKILLed child not dying after 10s")
		}
		time.Sleep(time.Millisecond)
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
