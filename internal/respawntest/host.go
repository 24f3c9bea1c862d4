package respawntest

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// HostEnv is set in the environment of a host that [KillHost] runs.
const HostEnv = "RESPAWNTEST_HOST"

// IsHost reports whether this test binary runs as [KillHost]'s host.
func IsHost() bool { return os.Getenv(HostEnv) != "" }

// ServeAsHost is what a test running as [KillHost]'s host calls once it
// has launched a plugin: it says the plugin's pid and waits to be killed.
func ServeAsHost(tb testing.TB, pid int) {
	tb.Helper()
	fmt.Printf("plugin pid %d\n", pid)
	<-Context(tb, time.Minute).Done()
	tb.Fatal("the host was not killed")
}

// KillHost runs this test binary again as a plugin host, running only the
// tests that match run (the test that calls it, which must then see
// [IsHost] and launch a plugin, then call [ServeAsHost]). As soon as the
// host says its plugin's pid, KillHost SIGKILLs the host, as the OOM killer
// or a timeout would, reaps it and returns that pid: the plugin, which is
// not this process's child, is then the test's to watch ([WaitDead]).
func KillHost(tb testing.TB, run string) int {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run="+run, "-test.count=1")
	cmd.Env = append(os.Environ(), HostEnv+"=1")
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	pid := 0
	for sc := bufio.NewScanner(out); pid == 0 && sc.Scan(); {
		if n, ok := strings.CutPrefix(sc.Text(), "plugin pid "); ok {
			pid, _ = strconv.Atoi(n)
		}
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if pid == 0 {
		tb.Fatalf("the host (%s) said no plugin pid", run)
	}
	tb.Cleanup(func() {
		if tb.Failed() {
			_ = killPID(pid) // the plugin outlived its host: do not leave it running
		}
	})
	return pid
}
