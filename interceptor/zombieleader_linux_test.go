package interceptor_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grpc-respawn/respawn/interceptor"
	"github.com/grpc-respawn/respawn/internal/plugintest"
	"github.com/grpc-respawn/respawn/internal/respawntest"
	"github.com/grpc-respawn/respawn/internal/testpb"
	"github.com/grpc-respawn/respawn/redial"
	"github.com/grpc-respawn/respawn/redial/command"
)

// TestDrainedZombieLeaderKeepsThePlugin: a plugin whose main thread has
// exited while its other threads serve (its process a zombie leader,
// alive) drains its connections: a read cut by the drain is retried on it,
// all its attempts, and nothing respawns. Its process is not taken for
// dead.
func TestDrainedZombieLeaderKeepsThePlugin(t *testing.T) {
	_, gcc := exec.LookPath("gcc")
	_, cc := exec.LookPath("cc")
	if gcc != nil && cc != nil || os.Getenv("CGO_ENABLED") == "0" {
		t.Skip("no cgo (a C compiler, CGO_ENABLED) to build a plugin whose main thread exits")
	}
	bin := plugintest.BuildOncePackage(t, "github.com/grpc-respawn/respawn/internal/cmd/leaderexitplugin")
	journal := filepath.Join(t.TempDir(), "journal")
	cmd := &command.Hook{Path: bin, Args: append([]string{"-journal", journal}, drainingPlugin...)}
	rh := respawntest.NewHost(t, cmd, interceptor.New(interceptor.WithLimits(interceptor.Limits{EvidenceWait: 2 * time.Second, MaxAttempts: 2})))
	g := rh.Conn.Current()
	waitZombieLeader(t, g.Process().PID)
	launched := rh.Events.Count(redial.EventRespawnStart, 0)

	_, err := rh.Client.Get(respawntest.Context(t, 30*time.Second), &testpb.GetRequest{Id: "r", DelayMs: 3000})
	if s := status.Convert(err); s.Code() != codes.Unavailable || !strings.Contains(s.Message(), "received prior goaway: ") {
		t.Errorf("got %v, want the cut's Unavailable, after a GOAWAY", err)
	}
	j, jerr := plugintest.ReadJournal(journal)
	if jerr != nil {
		t.Fatal(jerr)
	}
	if j["r"] != 2 { // Limits.MaxAttempts, all on the same plugin
		t.Errorf("the call ran %d times, want 2", j["r"])
	}
	_ = rh.Conn.Close()                         // settle: a respawn on its way would show below
	rh.Events.Wait(t, redial.EventClosed, 0, 1) // the last event: the others have been seen
	if starts := rh.Events.Count(redial.EventRespawnStart, 0) - launched; starts != 0 || rh.Conn.Stats().CurrentGen != g.Number() {
		t.Errorf("%d respawns asked, generation %d; want 0, %d: a zombie leader whose threads serve is alive", starts, rh.Conn.Stats().CurrentGen, g.Number())
	}
}

// waitZombieLeader waits until pid's main thread shows as exited (State Z)
// while its other threads run: nothing signals it, so it polls, every
// millisecond, for at most 10s.
func waitZombieLeader(t *testing.T, pid int) {
	t.Helper()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	deadline := time.After(10 * time.Second)
	for {
		data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(data, []byte("\nState:\tZ")) {
			if bytes.Contains(data, []byte("\nThreads:\t1\n")) {
				t.Fatalf("pid %d exited: it has no thread left", pid)
			}
			return
		}
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("pid %d's main thread never exited", pid)
		}
	}
}
