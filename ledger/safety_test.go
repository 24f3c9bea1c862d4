//go:build unix

package ledger_test

import (
	"fmt"
	"google.golang.org/grpc/metadata"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/grpc-respawn/respawn/internal/ledgerwire"
	"github.com/grpc-respawn/respawn/internal/testpb"
	"github.com/grpc-respawn/respawn/ledger"
)

// TestSameIDConcurrently: a call whose id is already in flight fails
// Aborted, and the handler runs once.
func TestSameIDConcurrently(t *testing.T) {
	b := newBlocker()
	g := serve(t, privateDir(t), 1, ledger.Config{}, &service{appendFn: b.handler})
	firstErr := make(chan error, 1)
	go func() { _, _, err := appendCall(t, g, "dup", 0); firstErr <- err }()
	b.wait(t)
	for _, attempt := range []int{0, 1} {
		_, _, err := appendCall(t, g, "dup", attempt)
		if status.Code(err) != codes.Aborted || !strings.Contains(err.Error(), "already running in this plugin; not run twice") {
			t.Errorf("attempt %d with the id in flight: %v, want codes.Aborted, already running", attempt, err)
		}
	}
	close(b.release)
	if err := <-firstErr; err != nil {
		t.Errorf("the first call: %v, want it to complete", err)
	}
	if got := g.svc.runs.Load(); got != 1 {
		t.Errorf("handler ran %d times, want 1", got)
	}
}

// TestManyDistinctIDs: concurrent calls with distinct ids all run once,
// and each one's retry on the successor gets its own answer.
func TestManyDistinctIDs(t *testing.T) {
	const n = 32
	dir := privateDir(t)
	g1 := serve(t, dir, 1, ledger.Config{}, nil)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, _, err := appendCall(t, g1, fmt.Sprint("call-", i), 0); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("call on generation 1: %v", err)
	}
	g2 := serve(t, dir, 2, ledger.Config{}, nil)
	for i := range n {
		id := fmt.Sprint("call-", i)
		resp, how, err := appendCall(t, g2, id, 1)
		if err != nil || resp.GetId() != id || resp.GetPid() != 1 || how != ledgerwire.Replayed {
			t.Errorf("retry of %s = %v, %v, trailer %q; want generation 1's answer to it, replayed", id, resp, err, how)
		}
	}
	if r1, r2 := g1.svc.runs.Load(), g2.svc.runs.Load(); r1 != n || r2 != 0 {
		t.Errorf("handlers ran %d and %d times, want %d and 0", r1, r2, n)
	}
}

// TestDirectoryRemoved: once the ledger directory is gone under the
// plugin, calls still run (the host, finding no ledger file of a plugin
// that died, takes a call in flight at the death for an outcome unknown),
// and a retry whose dead plugins' ledgers are gone is not run: whether it
// ran cannot be told.
func TestDirectoryRemoved(t *testing.T) {
	dir := privateDir(t)
	g := serve(t, dir, 1, ledger.Config{}, nil)
	if _, _, err := appendCall(t, g, "before", 0); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if _, _, err := appendCall(t, g, "after", 0); err != nil {
		t.Errorf("a first attempt after the directory was removed: %v, want it run", err)
	}
	var tr metadata.MD
	_, err := g.client.Append(callCtx(t, "retried", "7.ledger"), &testpb.AppendRequest{Id: "retried"}, grpc.Trailer(&tr))
	how := ""
	if v := tr.Get(ledgerwire.TrailerKey); len(v) > 0 {
		how = v[0]
	}
	if status.Code(err) != codes.Unknown || how != ledgerwire.Unreadable || !strings.Contains(err.Error(), "not run") {
		t.Errorf("a retry after the directory was removed: %v, trailer %q; want codes.Unknown, %q, not run", err, how, ledgerwire.Unreadable)
	}
	if got := g.svc.runs.Load(); got != 2 {
		t.Errorf("handler ran %d times, want 2 (the retry not)", got)
	}
}

// TestNotRecorded: calls without an id and health checks go straight to
// their handlers and write nothing. (Which methods carry an id is the
// host's decision: it gives one to exactly the calls it cannot run twice.)
func TestNotRecorded(t *testing.T) {
	g := serve(t, privateDir(t), 1, ledger.Config{}, nil)
	calls := []struct {
		name string
		call func() error
	}{
		{"Append without an id", func() error { _, _, err := appendCall(t, g, "", 0); return err }},
		{"Append with an empty id", func() error {
			_, err := g.client.Append(callCtxMD(t, ledgerwire.IDKey, ""), &testpb.AppendRequest{})
			return err
		}},
		{"health Check with an id", func() error {
			_, err := g.health.Check(callCtx(t, "health", "1.ledger"), &healthpb.HealthCheckRequest{})
			return err
		}},
	}
	for _, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			if err := c.call(); err != nil {
				t.Fatal(err)
			}
			if got := recordedSize(t, g.ledger); got != g.opened {
				t.Errorf("ledger holds %d bytes, want %d, its opened record's", got, g.opened)
			}
		})
	}
}

// TestCallIDLength: an id over ledgerwire.MaxCallID is refused, unrun.
func TestCallIDLength(t *testing.T) {
	g := serve(t, privateDir(t), 1, ledger.Config{}, nil)
	tests := []struct {
		name     string
		id       string
		want     codes.Code
		wantRuns int64
	}{
		{"at the bound", strings.Repeat("a", ledgerwire.MaxCallID), codes.OK, 1},
		{"over it", strings.Repeat("b", ledgerwire.MaxCallID+1), codes.InvalidArgument, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := g.svc.runs.Load()
			_, _, err := appendCall(t, g, tt.id, 0)
			if got := status.Code(err); got != tt.want {
				t.Fatalf("call with a %d-byte id: %v, want code %v", len(tt.id), err, tt.want)
			}
			if ran := g.svc.runs.Load() - before; ran != tt.wantRuns {
				t.Errorf("handler ran %d times, want %d", ran, tt.wantRuns)
			}
		})
	}
}

// TestServerOptionsOff: without a usable RESPAWN_LEDGER and
// RESPAWN_LEDGER_KEY, ServerOptions gives no options, and says why in
// one line unless RESPAWN_LEDGER is unset.
func TestServerOptionsOff(t *testing.T) {
	dir := privateDir(t)
	open := filepath.Join(t.TempDir(), "open")
	if err := os.Mkdir(open, 0o755); err != nil {
		t.Fatal(err)
	}
	made := func(name string, content []byte, perm os.FileMode) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, content, perm); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, perm); err != nil {
			t.Fatal(err)
		}
		return path
	}
	written := made("7.ledger", []byte("x"), 0o600)
	readable := made("9.ledger", nil, 0o644)
	fresh := made("10.ledger", nil, 0o600)
	elsewhere := filepath.Join(t.TempDir(), "elsewhere.ledger")
	if err := os.WriteFile(elsewhere, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(elsewhere, filepath.Join(dir, "8.ledger")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "11.ledger"), 0o600); err != nil {
		t.Fatal(err)
	}
	linkedDir := filepath.Join(t.TempDir(), "linked")
	if err := os.Symlink(dir, linkedDir); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, env string
		unset     bool
		key       string
	}{
		{name: "unset", unset: true},
		{name: "empty", env: ""},
		{name: "relative", env: "ledgers/1.ledger"},
		{name: "not clean", env: dir + "/../ledgers/1.ledger"},
		{name: "not a ledger file's name", env: filepath.Join(dir, "ledger")},
		{name: "no such directory", env: filepath.Join(dir, "nope", "1.ledger")},
		{name: "a directory others can enter", env: filepath.Join(open, "1.ledger")},
		{name: "the directory through a symlink", env: filepath.Join(linkedDir, "10.ledger")},
		{name: "the host made no file", env: filepath.Join(dir, "1.ledger")},
		{name: "the file was written already", env: written},
		{name: "a file others can read", env: readable},
		{name: "a symlink at the file's name", env: filepath.Join(dir, "8.ledger")},
		{name: "a FIFO at the file's name", env: filepath.Join(dir, "11.ledger")},
		{name: "no key", env: fresh, key: "-"},
		{name: "a key that is not one", env: fresh, key: "a,b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(ledgerwire.Env, tt.env)
			if tt.unset {
				_ = os.Unsetenv(ledgerwire.Env)
			}
			t.Setenv(ledgerwire.KeyEnv, testKey)
			switch tt.key {
			case "-":
				_ = os.Unsetenv(ledgerwire.KeyEnv)
			case "":
			default:
				t.Setenv(ledgerwire.KeyEnv, tt.key)
			}
			ledger.ForgetOpened() // as in a process that opened none
			var opts []grpc.ServerOption
			said := stderrOf(t, func() { opts = ledger.ServerOptions(ledger.Config{}) })
			if len(opts) != 0 {
				t.Errorf("ServerOptions = %v, want none", opts)
			}
			wantSaid := !tt.unset && tt.env != ""
			if lines := strings.Count(said, "\n"); wantSaid && (lines != 1 || !strings.HasPrefix(said, "ledger: off")) || !wantSaid && said != "" {
				t.Errorf("stderr = %q, want one line saying the ledger is off: %v", said, wantSaid)
			}
		})
	}
	for _, path := range []string{elsewhere, fresh} {
		if fi, err := os.Stat(path); err != nil || fi.Size() != 0 {
			t.Errorf("%s: %v, %d bytes; want it left empty", path, err, fi.Size())
		}
	}
	if _, err := os.Lstat(filepath.Join(dir, "1.ledger")); err == nil {
		t.Error("a ledger file the host did not make was made")
	}
}

// stderrOf returns what f wrote on os.Stderr.
func stderrOf(t *testing.T, f func()) string {
	t.Helper()
	tmp, err := os.CreateTemp(t.TempDir(), "stderr")
	if err != nil {
		t.Fatal(err)
	}
	defer tmp.Close()
	saved := os.Stderr
	os.Stderr = tmp
	f()
	os.Stderr = saved
	b, err := os.ReadFile(tmp.Name())
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestKillPoints: a recorded call passes ledgerwire.At's four points in
// order; a call that is not recorded or is answered from a ledger passes
// none, and one whose started record fails passes only the first.
func TestKillPoints(t *testing.T) {
	var (
		mu     sync.Mutex
		passed []ledgerwire.Point
	)
	t.Cleanup(func() { ledgerwire.At = nil })
	ledgerwire.At = func(p ledgerwire.Point) { // set before serving, as test plugins do
		mu.Lock()
		passed = append(passed, p)
		mu.Unlock()
	}
	dir := privateDir(t)
	g := serve(t, dir, 1, ledger.Config{}, nil)
	g2 := serve(t, dir, 2, ledger.Config{}, nil) // a successor, in the same process
	all := []ledgerwire.Point{ledgerwire.BeforeStarted, ledgerwire.AfterStarted, ledgerwire.AfterHandler, ledgerwire.AfterCompleted}
	steps := []struct {
		name   string
		call   func() error
		want   []ledgerwire.Point
		wantOK bool
	}{
		{"recorded", func() error { _, _, err := appendCall(t, g, "call-1", 0); return err }, all, true},
		{"without an id", func() error { _, _, err := appendCall(t, g, "", 0); return err }, nil, true},
		{"replayed", func() error { _, _, err := appendCall(t, g2, "call-1", 1); return err }, nil, true},
		{"a retry whose ledgers are gone", func() error {
			if err := os.RemoveAll(dir); err != nil {
				t.Fatal(err)
			}
			_, _, err := appendCall(t, g2, "call-2", 1)
			return err
		}, nil, false},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			mu.Lock()
			passed = nil
			mu.Unlock()
			if err := s.call(); (err == nil) != s.wantOK {
				t.Fatalf("call: %v, want success %v", err, s.wantOK)
			}
			mu.Lock()
			defer mu.Unlock()
			if fmt.Sprint(passed) != fmt.Sprint(s.want) {
				t.Errorf("points passed = %v, want %v", passed, s.want)
			}
		})
	}
}

// TestServerOptionsConsumeEnv: ServerOptions removes RESPAWN_LEDGER from
// the environment, so that a process the plugin starts does not take its
// file, and a second call gives the same options, so that a plugin that
// makes its server with them keeps the ledger its file says it keeps.
func TestServerOptionsConsumeEnv(t *testing.T) {
	launch(t, filepath.Join(privateDir(t), ledgerwire.FileName(1)))
	first := ledger.ServerOptions(ledger.Config{})
	if len(first) == 0 {
		t.Fatal("ServerOptions: ledger off, want on")
	}
	for _, name := range []string{ledgerwire.Env, ledgerwire.KeyEnv} {
		if v, ok := os.LookupEnv(name); ok {
			t.Errorf("%s = %q after ServerOptions; want it unset", name, v)
		}
	}
	if again := ledger.ServerOptions(ledger.Config{}); len(again) != len(first) || &again[0] != &first[0] {
		t.Errorf("a second ServerOptions = %v; want the first's, %v", again, first)
	}
}
