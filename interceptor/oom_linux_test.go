package interceptor_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/grpc-respawn/respawn/interceptor"
	"github.com/grpc-respawn/respawn/internal/plugintest"
	"github.com/grpc-respawn/respawn/internal/respawntest"
	"github.com/grpc-respawn/respawn/internal/testpb"
	"github.com/grpc-respawn/respawn/redial"
	"github.com/grpc-respawn/respawn/redial/command"
)

// oomHostEnv names, in the environment of this test binary run again as a
// host, the memory cgroup it runs in.
const oomHostEnv = "RESPAWN_OOM_HOST_CGROUP"

// TestOOMKillIsPoison: a request that makes every plugin that runs it run
// out of memory in its cgroup, so that the kernel's OOM killer SIGKILLs it,
// costs two plugins and fails with ErrPoisonRequest, and each exit says
// "oom-killed". The test runs this binary again as the host, in a memory
// cgroup v1 of its own (it needs root and a writable memory controller);
// the plugins share that cgroup.
func TestOOMKillIsPoison(t *testing.T) {
	if os.Getenv(oomHostEnv) != "" {
		oomPoisonHost(t)
		return
	}
	if testing.Short() {
		t.Skip("two plugins run out of memory")
	}
	dir := memoryCgroup(t)
	ctx := respawntest.Context(t, 60*time.Second)
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", `echo $$ > "$0/cgroup.procs" && exec "$@"`,
		dir, os.Args[0], "-test.run=^TestOOMKillIsPoison$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), oomHostEnv+"="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestOOMKillIsPoison") {
		t.Fatalf("the host in memory cgroup %s: %v\n%s", dir, err, out)
	}
	t.Logf("host in %s:\n%s", dir, out)
}

// memoryCgroup makes a memory cgroup v1 under this process's, limited to
// 200 MiB, removed when the test ends; it skips the test where it cannot.
func memoryCgroup(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Skip(err)
	}
	var parent string
	for line := range strings.SplitSeq(string(b), "\n") {
		if f := strings.SplitN(line, ":", 3); len(f) == 3 && strings.Contains(","+f[1]+",", ",memory,") {
			parent = filepath.Join("/sys/fs/cgroup/memory", f[2])
		}
	}
	if parent == "" {
		t.Skip("no memory cgroup v1 here")
	}
	dir := filepath.Join(parent, "respawn-oom-"+strconv.Itoa(os.Getpid()))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Skipf("cannot make a memory cgroup: %v", err)
	}
	t.Cleanup(func() {
		if err := os.Remove(dir); err != nil {
			t.Errorf("remove the memory cgroup: %v", err)
		}
	})
	limit := []byte(strconv.Itoa(200 << 20))
	if err := os.WriteFile(filepath.Join(dir, "memory.limit_in_bytes"), limit, 0o644); err != nil {
		t.Skipf("cannot limit the memory cgroup: %v", err)
	}
	return dir
}

// oomPoisonHost is the host, in its memory cgroup: each plugin keeps 1 GiB
// resident per call, and its oom_score_adj is 1000, so that the OOM killer
// takes it, not the host.
func oomPoisonHost(t *testing.T) {
	bin := plugintest.BuildOnce(t)
	cmd := &command.Hook{Path: "/bin/sh", Args: []string{"-c", `echo 1000 > /proc/self/oom_score_adj && exec "$@"`,
		"plugin", bin, "-leak-per-call", strconv.Itoa(1 << 30)}}
	events := &respawntest.Events{}
	rc, err := redial.New(cmd, redial.WithPolicy(interceptor.New()), redial.WithEventHandler(events.Add))
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if err := rc.Connect(respawntest.Context(t, 20*time.Second)); err != nil {
		t.Fatal(err)
	}
	_, err = testpb.NewTestClient(rc).Get(respawntest.Context(t, 30*time.Second), &testpb.GetRequest{Key: "big"})
	var pe *interceptor.PoisonRequestError
	if !errors.As(err, &pe) || pe.Deaths != 2 {
		t.Fatalf("got %v, want ErrPoisonRequest after 2 deaths", err)
	}
	for n := range 2 {
		e := events.Wait(t, redial.EventExit, uint64(n+1), 1)
		t.Logf("generation %d: %v", n+1, e.Exit)
		if !e.Exit.OOMKilled || !e.Exit.SelfInflicted {
			t.Errorf("generation %d: %v, want an OOM kill", n+1, e.Exit)
		}
	}
}
