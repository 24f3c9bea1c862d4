package procfs

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// leaderExits is a program whose main thread exits (pthread_exit) while
// another thread runs on: the thread says so once the main thread is
// gone, and exits, the last, when its stdin closes.
const leaderExits = `#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

static pthread_t leader;

static void *serve(void *arg) {
	char c;
	pthread_join(leader, NULL);
	puts("main thread exited");
	fflush(stdout);
	while (read(0, &c, 1) > 0) {
	}
	return NULL;
}

int main(void) {
	pthread_t t;
	leader = pthread_self();
	if (pthread_create(&t, NULL, serve, NULL) != 0)
		return 1;
	pthread_exit(NULL);
}
`

// TestDyingZombieLeader: a process whose main thread has exited while
// another thread runs is a zombie leader (State Z, Threads 2) and alive;
// once its last thread has exited, unreaped, or once it is SIGKILLed, it
// is dying; it has exited only in the first case.
func TestDyingZombieLeader(t *testing.T) {
	bin := buildC(t, leaderExits)
	t.Run("last thread exits", func(t *testing.T) {
		pid, stdin := startZombieLeader(t, bin)
		if how, ok := Dying(pid); ok {
			t.Errorf("Dying(a zombie leader whose other thread runs) = %q; want alive", how)
		}
		if Exited(pid) {
			t.Error("Exited(a zombie leader whose other thread runs) = true; want false")
		}
		_ = stdin.Close()
		var info unix.Siginfo // the exit, without reaping it
		if err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil); err != nil {
			t.Fatalf("waitid: %v", err)
		}
		if how, ok := Dying(pid); !ok || how != "a zombie" {
			t.Errorf("Dying(a zombie, unreaped) = %q, %v; want a zombie", how, ok)
		}
		if !Exited(pid) {
			t.Error("Exited(a zombie whose threads have all exited) = false; want true")
		}
	})
	t.Run("SIGKILL", func(t *testing.T) {
		pid, _ := startZombieLeader(t, bin)
		if err := unix.Kill(pid, unix.SIGKILL); err != nil {
			t.Fatal(err)
		}
		if how, ok := Dying(pid); !ok {
			t.Errorf("Dying(a zombie leader SIGKILLed) = %q, %v; want dying", how, ok)
		}
	})
}

// startZombieLeader starts bin, a leaderExits, and returns its pid once
// its main thread has exited, and its stdin, whose closing ends it.
func startZombieLeader(t *testing.T, bin string) (int, io.Closer) {
	t.Helper()
	cmd := exec.Command(bin)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	if line, err := bufio.NewReader(stdout).ReadString('\n'); err != nil || line != "main thread exited\n" {
		t.Fatalf("the program said %q, %v; want its main thread exited", line, err)
	}
	waitLeaderZombie(t, cmd.Process.Pid)
	return cmd.Process.Pid, stdin
}

// waitLeaderZombie waits until the kernel shows pid's leader as exited (it
// follows pthread_join's return by a few instructions of the kernel's):
// nothing signals it, so it polls, every millisecond, for at most 10s.
func waitLeaderZombie(t *testing.T, pid int) {
	t.Helper()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	deadline := time.After(10 * time.Second)
	for {
		data, err := status(pid)
		if err != nil {
			t.Fatal(err)
		}
		if tk := parseTask(data); tk.exited {
			if tk.threads != 2 {
				t.Fatalf("a zombie leader with %d threads; want 2", tk.threads)
			}
			return
		}
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("pid %d's main thread never showed as exited", pid)
		}
	}
}

// buildC compiles the C program src into t.TempDir(), or skips t when no
// C compiler is installed.
func buildC(t *testing.T, src string) string {
	t.Helper()
	cc, err := exec.LookPath("cc")
	if err != nil {
		if cc, err = exec.LookPath("gcc"); err != nil {
			t.Skip("no C compiler (cc, gcc) to build the test program")
		}
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "prog.c")
	if err := os.WriteFile(file, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "prog")
	out, err := exec.Command(cc, "-pthread", "-o", bin, file).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", cc, err, strings.TrimSpace(string(out)))
	}
	return bin
}
