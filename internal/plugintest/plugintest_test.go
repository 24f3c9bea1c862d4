//go:build unix

package plugintest_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/grpc-respawn/respawn/internal/plugintest"
	"github.com/grpc-respawn/respawn/internal/respawntest"
	"github.com/grpc-respawn/respawn/internal/testpb"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// dial connects to p and closes the connection when the test ends.
func dial(t *testing.T, p *plugintest.Plugin) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(p.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// exitCode returns err's process exit code, or -1 if it is not an exit.
func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	return -1
}

func TestRPCs(t *testing.T) {
	t.Parallel()
	journal := filepath.Join(t.TempDir(), "journal")
	p := plugintest.Start(t, plugintest.BuildOnce(t), "-journal", journal)
	if !strings.HasPrefix(p.Addr, "unix:///") {
		t.Fatalf("Addr = %q, want unix:///...", p.Addr)
	}
	c := testpb.NewTestClient(dial(t, p))
	ctx := respawntest.Context(t, 30*time.Second)
	pid := int64(p.PID)

	t.Run("PutGet", func(t *testing.T) {
		if _, err := c.Put(ctx, &testpb.PutRequest{Id: "p", Key: "k", Value: "v"}); err != nil {
			t.Fatal(err)
		}
		got, err := c.Get(ctx, &testpb.GetRequest{Id: "g", Key: "k"})
		if err != nil {
			t.Fatal(err)
		}
		if got.GetPid() != pid || got.GetId() != "g" || got.GetValue() != "v" || !got.GetFound() {
			t.Errorf("Get = %v, want pid %d id g value v found", got, pid)
		}
		miss, err := c.Get(ctx, &testpb.GetRequest{Key: "absent"})
		if err != nil || miss.GetFound() {
			t.Errorf("Get(absent) = %v, %v; want not found", miss, err)
		}
	})

	t.Run("Append", func(t *testing.T) {
		for i, id := range []string{"a", "a", "b"} {
			got, err := c.Append(ctx, &testpb.AppendRequest{Id: id})
			if err != nil {
				t.Fatal(err)
			}
			if got.GetPid() != pid || got.GetExecutions() != int64(i+1) {
				t.Errorf("Append #%d = %v, want pid %d executions %d", i, got, pid, i+1)
			}
		}
		counts, err := plugintest.ReadJournal(journal)
		if err != nil {
			t.Fatal(err)
		}
		if counts["a"] != 2 || counts["b"] != 1 {
			t.Errorf("journal = %v, want a:2 b:1", counts)
		}
	})

	t.Run("Watch", func(t *testing.T) {
		stream, err := c.Watch(ctx, &testpb.WatchRequest{Id: "w", Count: 3, IntervalMs: 1})
		if err != nil {
			t.Fatal(err)
		}
		var seqs []int64
		for {
			msg, err := stream.Recv()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if msg.GetPid() != pid || msg.GetId() != "w" {
				t.Errorf("Watch message %v, want pid %d id w", msg, pid)
			}
			seqs = append(seqs, msg.GetSeq())
		}
		if len(seqs) != 3 || seqs[0] != 0 || seqs[1] != 1 || seqs[2] != 2 {
			t.Errorf("Watch seqs = %v, want [0 1 2]", seqs)
		}
	})

	t.Run("Fail", func(t *testing.T) {
		for _, code := range []codes.Code{codes.Unavailable, codes.FailedPrecondition} {
			_, err := c.Fail(ctx, &testpb.FailRequest{Code: uint32(code), Message: "handler says " + code.String()})
			st := status.Convert(err)
			if st.Code() != code || st.Message() != "handler says "+code.String() {
				t.Errorf("Fail(%v) = %v, want that code and message", code, err)
			}
		}
	})

	t.Run("DelayHonoursDeadline", func(t *testing.T) {
		short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		_, err := c.Get(short, &testpb.GetRequest{DelayMs: 60_000})
		if status.Code(err) != codes.DeadlineExceeded {
			t.Errorf("Get with long delay = %v, want DeadlineExceeded", err)
		}
	})

	t.Run("Health", func(t *testing.T) {
		h := healthpb.NewHealthClient(dial(t, p))
		for _, svc := range []string{"", "plugin"} {
			got, err := h.Check(ctx, &healthpb.HealthCheckRequest{Service: svc})
			if err != nil || got.GetStatus() != healthpb.HealthCheckResponse_SERVING {
				t.Errorf("Check(%q) = %v, %v; want SERVING", svc, got, err)
			}
		}
	})
}

func TestNoHealth(t *testing.T) {
	t.Parallel()
	p := plugintest.Start(t, plugintest.BuildOnce(t), "-no-health")
	conn := dial(t, p)
	ctx := respawntest.Context(t, 30*time.Second)
	if _, err := testpb.NewTestClient(conn).Get(ctx, &testpb.GetRequest{}); err != nil {
		t.Fatalf("Get: %v", err)
	}
	_, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	if status.Code(err) != codes.Unimplemented {
		t.Errorf("health Check = %v, want Unimplemented", err)
	}
}

// TestStartDelay checks that -start-delay holds the address line back
// without measuring how long: a delayed plugin and an undelayed one start
// together, and once the undelayed one has printed its address (plus a
// grace period) the delayed one must still be silent and alive. If the flag
// were ignored, both would print at about the same time. A loaded machine
// can only make this pass wrongly, never fail wrongly: a 30s delay cannot
// end within the test's wait.
func TestStartDelay(t *testing.T) {
	t.Parallel()
	bin := plugintest.BuildOnce(t)

	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	cmd := exec.Command(bin, "-start-delay", "30s")
	cmd.Stdout, cmd.Stderr = w, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = cmd.Start()
	w.Close()
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	}()

	plugintest.Start(t, bin) // returns once the undelayed plugin has printed

	const grace = 500 * time.Millisecond
	if err := r.SetReadDeadline(time.Now().Add(grace)); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(r).ReadString('\n')
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		// Still silent and still running (an exit would close the pipe).
	case err == nil:
		t.Errorf("plugin with -start-delay 30s printed %q along with an undelayed one", line)
	default:
		t.Errorf("plugin with -start-delay 30s: read stdout: %v (exited?)", err)
	}

	t.Run("serves after the delay", func(t *testing.T) {
		p := plugintest.Start(t, bin, "-start-delay", "200ms")
		if _, err := testpb.NewTestClient(dial(t, p)).Get(respawntest.Context(t, 30*time.Second), &testpb.GetRequest{}); err != nil {
			t.Fatalf("Get: %v", err)
		}
	})
}

func TestSIGTERMStopsCleanly(t *testing.T) {
	t.Parallel()
	p := plugintest.Start(t, plugintest.BuildOnce(t))
	sock := strings.TrimPrefix(p.Addr, "unix://")
	if err := p.Kill(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := p.Wait(); err != nil {
		t.Fatalf("Wait after SIGTERM = %v, want clean exit", err)
	}
	if _, err := os.Stat(filepath.Dir(sock)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket dir still there after SIGTERM: %v", err)
	}
	if err := p.Kill(syscall.SIGTERM); !errors.Is(err, os.ErrProcessDone) {
		t.Errorf("Kill after exit = %v, want os.ErrProcessDone", err)
	}
}

func TestExitAtStart(t *testing.T) {
	t.Parallel()
	p, err := plugintest.Launch(plugintest.BuildOnce(t), "-exit-at-start")
	if err == nil {
		p.Close()
		t.Fatal("Launch succeeded, want error")
	}
	if exitCode(err) != 3 {
		t.Errorf("Launch error = %v, want exit status 3", err)
	}
}

func TestExitAfterStart(t *testing.T) {
	t.Parallel()
	p := plugintest.Start(t, plugintest.BuildOnce(t), "-exit-after-start")
	// Wait is safe to call repeatedly and always reports the same exit.
	for range 2 {
		if err := p.Wait(); exitCode(err) != 4 {
			t.Errorf("Wait = %v, want exit status 4", err)
		}
	}
}

// A plugin that prints garbage is a failed start: Launch rejects the line
// and kills the plugin rather than handing out an unusable address.
func TestGarbage(t *testing.T) {
	t.Parallel()
	p, err := plugintest.Launch(plugintest.BuildOnce(t), "-garbage")
	if err == nil {
		p.Close()
		t.Fatal("Launch succeeded, want error")
	}
	if !strings.Contains(err.Error(), "this is not an address") {
		t.Errorf("Launch error = %v, want it to quote the garbage line", err)
	}
}

func TestReadJournalMissing(t *testing.T) {
	t.Parallel()
	counts, err := plugintest.ReadJournal(filepath.Join(t.TempDir(), "none"))
	if err != nil || len(counts) != 0 {
		t.Errorf("ReadJournal(missing) = %v, %v; want empty, nil", counts, err)
	}
}

func TestWaitJournal(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "journal")
	twice := func(j map[string]int) bool { return j["a"] >= 2 }

	short, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := plugintest.WaitJournal(short, path, twice); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitJournal on a missing journal: got %v, want DeadlineExceeded", err)
	}
	if err := os.WriteFile(path, []byte("a\nb\na\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := plugintest.WaitJournal(respawntest.Context(t, 30*time.Second), path, twice); err != nil {
		t.Fatalf("WaitJournal: %v", err)
	}
}
