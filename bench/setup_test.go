//go:build unix

package bench

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/retry"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"

	"github.com/grpc-respawn/respawn/interceptor"
	"github.com/grpc-respawn/respawn/internal/plugintest"
	"github.com/grpc-respawn/respawn/internal/respawntest"
	"github.com/grpc-respawn/respawn/internal/testpb"
	"github.com/grpc-respawn/respawn/internal/testplugin"
	"github.com/grpc-respawn/respawn/internal/timeline"
	"github.com/grpc-respawn/respawn/redial"
	"github.com/grpc-respawn/respawn/redial/command"
)

// stacks are the client stacks of the happy-path benchmarks, in the order
// they run.
var stacks = []string{"plain", "respawn", "mwretry", "both"}

// mwRetry returns go-grpc-middleware's retry interceptors, enabled (its
// default is 0 retries, which disables it) with at most 3 retries on its
// default codes (Unavailable, ResourceExhausted).
func mwRetry() []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithChainUnaryInterceptor(retry.UnaryClientInterceptor(retry.WithMax(3))),
		grpc.WithChainStreamInterceptor(retry.StreamClientInterceptor(retry.WithMax(3))),
	}
}

// dialStack returns a client for target built as stack, and a func that
// closes it. transport holds extra dial options (a bufconn dialer).
func dialStack(tb testing.TB, stack, target string, transport ...grpc.DialOption) (grpc.ClientConnInterface, func()) {
	tb.Helper()
	switch stack {
	case "plain", "mwretry":
		opts := append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, transport...)
		if stack == "mwretry" {
			opts = append(opts, mwRetry()...)
		}
		cc, err := grpc.NewClient(target, opts...)
		if err != nil {
			tb.Fatal(err)
		}
		return cc, func() { _ = cc.Close() }
	case "respawn", "both":
		// The plugin is already running: the hook only says where it is.
		hook := respawntest.RespawnerFunc(func(context.Context, redial.Request) (redial.Backend, error) {
			return redial.Backend{Target: target}, nil
		})
		dial := transport
		if stack == "both" {
			// Dial options come before the policy's, so mwretry is the
			// outer interceptor and respawn runs inside each of its tries.
			dial = append(dial[:len(dial):len(dial)], mwRetry()...)
		}
		rc, err := redial.New(hook, redial.WithPolicy(interceptor.New()), redial.WithDialOptions(dial...))
		if err != nil {
			tb.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := rc.Connect(ctx); err != nil {
			tb.Fatalf("Connect: %v", err)
		}
		return rc, func() { _ = rc.Close() }
	}
	tb.Fatalf("unknown stack %q", stack)
	return nil, nil
}

// serveBufconn serves the test service in-process over bufconn and returns
// the target and the dial option to reach it.
func serveBufconn(tb testing.TB) (string, grpc.DialOption) {
	tb.Helper()
	lis := bufconn.Listen(1 << 20)
	s := grpc.NewServer()
	testplugin.Register(s, testplugin.New(""))
	go func() { _ = s.Serve(lis) }()
	tb.Cleanup(s.Stop)
	dialer := grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
		return lis.DialContext(ctx)
	})
	return "passthrough:///bufnet", dialer
}

// launchPlugin starts the test plugin, with args, as a subprocess for the
// whole of a benchmark and returns its target; it is stopped and reaped
// when the benchmark ends.
func launchPlugin(tb testing.TB, args ...string) string {
	tb.Helper()
	ctx, cancel := callCtx()
	defer cancel()
	c := pluginCommand(tb, "")
	c.Args = append(c.Args, args...)
	be, err := c.Respawn(ctx, redial.Request{})
	if err != nil {
		tb.Fatalf("start plugin: %v", err)
	}
	tb.Cleanup(func() { _ = be.Stop() })
	return be.Target
}

// pluginCommand returns the launch hook for the test plugin. A non-empty journal
// makes the plugin record each call that carries an id.
func pluginCommand(tb testing.TB, journal string) *command.Hook {
	tb.Helper()
	c := &command.Hook{Path: plugintest.BuildOnce(tb), Stderr: pluginStderr(tb)}
	if journal != "" {
		c.Args = []string{"-journal", journal}
	}
	return c
}

// pluginStderr returns where the plugins of one benchmark write their
// stderr: never to the test binary's own output, where a plugin's line
// would land in the middle of a result line (go test prints a
// benchmark's name before it runs and its numbers after), and benchstat
// would drop the result. The plugins' last 2 KiB are logged if the
// benchmark fails.
//
// A plugin launched by command.Hook writes into a pipe that redial
// reads, so it holds no descriptor of the test binary's stdout or stderr:
// if the test binary dies (killed by go test's -timeout, say) before it has
// stopped its plugins, go test does not wait for them to close its pipe.
func pluginStderr(tb testing.TB) *tail {
	t := &tail{}
	tb.Cleanup(func() {
		if tb.Failed() {
			tb.Logf("the plugins' stderr:\n%s", t)
		}
	})
	return t
}

// newRespawn returns a redial.Conn with respawn's policy that launches the
// test plugin, and has launched the first one.
func newRespawn(tb testing.TB, hook redial.Respawner, opts ...redial.Option) *redial.Conn {
	tb.Helper()
	return started(tb, func() (*redial.Conn, error) {
		return redial.New(hook, append([]redial.Option{redial.WithPolicy(interceptor.New())}, opts...)...)
	})
}

// started makes a Conn with newConn, starts its plugin and makes one call.
func started(tb testing.TB, newConn func() (*redial.Conn, error)) *redial.Conn {
	tb.Helper()
	rc, err := newConn()
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := rc.Connect(ctx); err != nil {
		_ = rc.Close()
		tb.Fatalf("Connect: %v", err)
	}
	// One call before any kill, as a real host would have made: a plugin
	// dies while in use, not right after it starts. It also makes the first
	// kill like every later one: the kill hits a connection that has
	// served, and the breaker has seen a healthy plugin. It is not needed
	// for speed: redial backs off only after failed respawns, so the first
	// respawn after a plugin that came up runs at once, served or not.
	if err := get(testpb.NewTestClient(rc)); err != nil {
		_ = rc.Close()
		tb.Fatalf("first call: %v", err)
	}
	return rc
}

// killProcess SIGKILLs the plugin process alone, as the OOM killer does, if
// it has not exited yet. It reports whether it sent the signal.
func killProcess(p *redial.Process) bool {
	if _, exited := p.Exit(); exited {
		return false
	}
	return syscall.Kill(p.PID, syscall.SIGKILL) == nil
}

// callCtx bounds one benchmark call: long enough for any recovery, short
// enough that a bug shows up as a failure rather than a hang.
func callCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 20*time.Second)
}

// benchCtx bounds a whole happy-path benchmark, every iteration of it: the
// ctx is made once, outside the timed loop, so the loop is the same as with
// no deadline except that grpc sends the deadline along with each call, as
// it would for a host that sets one. The bound is long enough for any
// -benchtime one would use and short enough that a hung call fails the
// benchmark rather than waiting for go test's own timeout.
func benchCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 5*time.Minute)
}

// get is the call every recovery benchmark makes.
func get(client testpb.TestClient) error {
	ctx, cancel := callCtx()
	defer cancel()
	_, err := client.Get(ctx, &testpb.GetRequest{Key: "k"})
	return err
}

// reportPercentiles reports the p50 and p99 of ds in milliseconds. With
// fewer than 100 samples the p99 is the slowest one.
func reportPercentiles(b *testing.B, ds []time.Duration, unit string) {
	if len(ds) == 0 {
		return
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	pct := func(q float64) float64 {
		i := int(float64(len(ds))*q+0.999999) - 1
		i = min(max(i, 0), len(ds)-1)
		return float64(ds[i]) / float64(time.Millisecond)
	}
	b.ReportMetric(pct(0.50), "p50-"+unit)
	b.ReportMetric(pct(0.99), "p99-"+unit)
}

// timelinePath returns where the timeline of the sub-benchmark named name
// goes: RESPAWN_TIMELINE with the name inserted before the extension, or ""
// when the variable is unset.
func timelinePath(name string) string {
	path := os.Getenv("RESPAWN_TIMELINE")
	if path == "" {
		return ""
	}
	ext := filepath.Ext(path)
	name = strings.NewReplacer("/", "-", "=", "-").Replace(name)
	return fmt.Sprintf("%s-%s%s", strings.TrimSuffix(path, ext), name, ext)
}

// writeTimeline writes tl as an SVG to path.
func writeTimeline(b *testing.B, tl *timeline.Timeline, path string) {
	f, err := os.Create(path)
	if err != nil {
		b.Error(err)
		return
	}
	if err := tl.WriteSVG(f); err != nil {
		b.Error(err)
	}
	if err := f.Close(); err != nil {
		b.Error(err)
	}
}

// tail is an io.Writer that keeps the last 2 KiB written to it.
type tail struct {
	mu  sync.Mutex
	buf []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > 4<<10 {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-2<<10:]...)
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf[max(0, len(t.buf)-2<<10):])
}
