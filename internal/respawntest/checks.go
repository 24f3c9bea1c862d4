package respawntest

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/grpc-respawn/respawn/internal/testpb"
	"github.com/grpc-respawn/respawn/redial"
)

// NewConn returns a Conn closed when the test ends.
func NewConn(tb testing.TB, hook redial.Respawner, opts ...redial.Option) *redial.Conn {
	tb.Helper()
	rc, err := redial.New(hook, opts...)
	if err != nil {
		tb.Fatalf("New: %v", err)
	}
	tb.Cleanup(func() { _ = rc.Close() })
	return rc
}

// WaitDone waits up to 20s for ch to be closed.
func WaitDone(tb testing.TB, ch <-chan struct{}, what string) {
	tb.Helper()
	select {
	case <-ch:
	case <-time.After(20 * time.Second):
		tb.Fatalf("timed out waiting: %s", what)
	}
}

var pidRE = regexp.MustCompile(`pid (\d+)`)

// PIDIn returns the pid an error message names.
func PIDIn(tb testing.TB, err error) int {
	tb.Helper()
	m := pidRE.FindStringSubmatch(err.Error())
	if m == nil {
		tb.Fatalf("error %q names no pid", err)
	}
	pid, _ := strconv.Atoi(m[1])
	return pid
}

// WantContains checks that err is an error whose text contains each of subs.
func WantContains(tb testing.TB, err error, subs ...string) {
	tb.Helper()
	if err == nil {
		tb.Fatalf("got no error, want one containing %q", subs)
	}
	for _, s := range subs {
		if !strings.Contains(err.Error(), s) {
			tb.Errorf("error %q does not contain %q", err, s)
		}
	}
}

// WantServedBy calls Get on target, a test plugin's address, and checks
// which pid answered.
func WantServedBy(tb testing.TB, target string, pid int) {
	tb.Helper()
	cc, err := grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		tb.Fatal(err)
	}
	defer cc.Close()
	resp, err := testpb.NewTestClient(cc).Get(Context(tb, 10*time.Second), &testpb.GetRequest{})
	if err != nil {
		tb.Fatalf("Get on %s: %v", target, err)
	}
	if got := resp.GetPid(); got != int64(pid) {
		tb.Errorf("served by pid %d, want %d", got, pid)
	}
}

// Host is a plugin host under test, the one every package's harness builds
// on: a Conn made with a hook, a policy and options and started with
// Connect, the events it reports, the Handle its policy was given, and a
// stub of the test service bound to the Conn. The Conn is closed when the
// test ends.
type Host struct {
	Conn   *redial.Conn
	Handle redial.Handle // nil without a policy
	Events *Events
	Client testpb.TestClient
}

// NewHost starts a Host. A nil p installs no policy: the Conn then routes
// calls itself, as redial.New without redial.WithPolicy does. opts come
// after the Host's own event handler, so one of them replaces it.
func NewHost(tb testing.TB, hook redial.Respawner, p redial.Policy, opts ...redial.Option) *Host {
	tb.Helper()
	h := &Host{Events: &Events{}}
	all := []redial.Option{redial.WithEventHandler(h.Events.Add)}
	if p != nil {
		all = append(all, WithHandle(p, &h.Handle))
	}
	h.Conn = NewConn(tb, hook, append(all, opts...)...)
	if err := h.Conn.Connect(Context(tb, 20*time.Second)); err != nil {
		tb.Fatalf("Connect: %v", err)
	}
	h.Client = testpb.NewTestClient(h.Conn)
	return h
}
