package proc

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestHeldFilesLetGoAtTheReport: a plugin started here has its status
// file, and the file of its OOM count where one is readable, held open
// while it runs and let go once its exit is reported, whether a SIGKILL
// (whose report reads the count again) or another signal ended it; a
// start that fails holds neither. Meanwhile Await, asked from several
// goroutines while the exit is reported (and the file closed under them),
// never says a plugin whose exit was reported is alive, and says the
// reaped plugin is dead.
func TestHeldFilesLetGoAtTheReport(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGKILL, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) { heldUntilTheReport(t, sig) })
	}
}

// heldUntilTheReport runs a plugin that sig ends, and checks what it holds
// open and what Await says until its exit is reported.
func heldUntilTheReport(t *testing.T, sig syscall.Signal) {
	before := openFiles(t)
	g, stdout, stderr, err := launch(exec.Command("sleep", "60"))
	if err != nil {
		t.Fatal(err)
	}
	_, _ = stdout.Close(), stderr.Close()
	statusPath := "/proc/" + strconv.Itoa(g.pid) + "/status"
	held := []string{statusPath}
	if g.oom.f != nil {
		held = append(held, g.oom.f.Name())
	}
	running := openFiles(t)
	for _, path := range held {
		if running[path] != before[path]+1 {
			t.Errorf("%s: open %d times while the plugin runs, %d before; want one more", path, running[path], before[path])
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				reported := g.proc.Ended()
				if dead := g.proc.Await(ctx, 0); reported && !dead {
					t.Error("Await: alive, after the exit was reported")
					return
				}
			}
		}()
	}
	if err := syscall.Kill(g.pid, sig); err != nil {
		t.Fatal(err)
	}
	g.reap(nil) // here, not on a goroutine: the report is made when it returns
	close(stop)
	wg.Wait()
	if !g.proc.Await(ctx, 0) {
		t.Error("Await: alive, after the exit was reported")
	}
	after := openFiles(t)
	for _, path := range held {
		if after[path] != before[path] {
			t.Errorf("%s: open %d times after the exit report, %d before", path, after[path], before[path])
		}
	}

	if _, _, _, err := launch(exec.Command("/nonexistent/plugin")); err == nil {
		t.Fatal("a plugin with no binary started")
	}
	failed := openFiles(t)
	for _, path := range held[1:] {
		if failed[path] != before[path] {
			t.Errorf("%s: open %d times after a failed start, %d before", path, failed[path], before[path])
		}
	}
}

// openFiles counts the descriptors of this process by what they name.
func openFiles(t *testing.T) map[string]int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	files := make(map[string]int)
	for _, e := range entries {
		if name, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil {
			files[name]++
		}
	}
	return files
}
