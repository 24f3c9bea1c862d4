//go:build unix

package ledger_test

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"

	"github.com/grpc-respawn/respawn/internal/ledgerwire"
	"github.com/grpc-respawn/respawn/internal/testpb"
	"github.com/grpc-respawn/respawn/ledger"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// service is one generation's Test service: it counts the runs of its
// handlers and answers with its generation number as Pid.
type service struct {
	testpb.UnimplementedTestServer
	gen  int64
	runs atomic.Int64
	// appendFn, if set, is Append's handler after it counted the run.
	appendFn func(ctx context.Context, req *testpb.AppendRequest) (*testpb.AppendResponse, error)
}

func (s *service) Append(ctx context.Context, req *testpb.AppendRequest) (*testpb.AppendResponse, error) {
	n := s.runs.Add(1)
	if s.appendFn != nil {
		return s.appendFn(ctx, req)
	}
	return &testpb.AppendResponse{Pid: s.gen, Id: req.GetId(), Executions: n}, nil
}

func (s *service) Get(context.Context, *testpb.GetRequest) (*testpb.GetResponse, error) {
	s.runs.Add(1)
	return &testpb.GetResponse{Pid: s.gen}, nil
}

// blocker makes Append wait in its handler until released.
type blocker struct {
	entered chan struct{} // one send per call that entered the handler
	release chan struct{}
}

func newBlocker() *blocker {
	return &blocker{entered: make(chan struct{}, 64), release: make(chan struct{})}
}

func (b *blocker) handler(ctx context.Context, req *testpb.AppendRequest) (*testpb.AppendResponse, error) {
	b.entered <- struct{}{}
	select {
	case <-b.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return &testpb.AppendResponse{Id: req.GetId()}, nil
}

// wait waits for a call to be in the handler.
func (b *blocker) wait(t *testing.T) {
	t.Helper()
	select {
	case <-b.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("no call entered the handler in 10s")
	}
}

// generation is one plugin of a Conn, served in this process.
type generation struct {
	svc    *service
	client testpb.TestClient
	health healthpb.HealthClient
	ledger string // its ledger file
	opened int64  // its records once opened: its opened record, no call's
}

// privateDir returns a new directory of mode 0700, as the host makes one
// for a Conn's ledgers.
func privateDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "ledgers")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	return dir
}

// serve starts the n-th generation of the plugin whose ledgers are in dir,
// as the host launches it: RESPAWN_LEDGER names its file, and the plugin
// calls ServerOptions. A nil svc is a plain service.
func serve(t *testing.T, dir string, n uint64, cfg ledger.Config, svc *service) *generation {
	t.Helper()
	if svc == nil {
		svc = &service{}
	}
	svc.gen = int64(n)
	path := filepath.Join(dir, ledgerwire.FileName(n))
	launch(t, path)
	opts := ledger.ServerOptions(cfg)
	if len(opts) == 0 {
		t.Fatalf("ServerOptions with %s=%s: ledger off, want on", ledgerwire.Env, path)
	}
	cc := listen(t, svc, opts...)
	return &generation{svc: svc, ledger: path, opened: recordedSize(t, path), client: testpb.NewTestClient(cc), health: healthpb.NewHealthClient(cc)}
}

// testKey is the key the tests give their launches.
const testKey = "testkey"

// launch sets this process's environment as respawn's host sets a
// launch's, for a ledger file at path: it makes the file, empty, and names
// it and the launch's key.
func launch(t *testing.T, path string) {
	t.Helper()
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv(ledgerwire.Env, path)
	t.Setenv(ledgerwire.KeyEnv, testKey)
}

// listen serves svc and a health service with opts on a unix socket and
// returns a client connection to it; both end with the test.
func listen(t *testing.T, svc testpb.TestServer, opts ...grpc.ServerOption) *grpc.ClientConn {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "s.sock")
	lis, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer(opts...)
	testpb.RegisterTestServer(s, svc)
	healthpb.RegisterHealthServer(s, health.NewServer())
	go func() { _ = s.Serve(lis) }()
	t.Cleanup(s.Stop)
	cc, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

// callCtx returns a context for a call: with a deadline, the ledger id and,
// if files is not empty, the retry mark naming those ledger files, as the
// host sends them.
func callCtx(t *testing.T, id, files string) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	if id != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, ledgerwire.IDKey, id)
	}
	if files != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, ledgerwire.RetryKey, files)
	}
	return ctx
}

// before names the ledger files of generations 1 to n-1, as a retry on
// generation n after the deaths of those before it names them.
func before(n int64) string {
	names := make([]string, 0, n)
	for i := int64(1); i < n; i++ {
		names = append(names, ledgerwire.FileName(uint64(i)))
	}
	return strings.Join(names, ",")
}

// callCtxMD returns a context for a call with a deadline and the metadata
// kv.
func callCtxMD(t *testing.T, kv ...string) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return metadata.AppendToOutgoingContext(ctx, kv...)
}

// appendCall makes an Append call and returns its response, the
// x-respawn-ledger trailer and its error.
func appendCall(t *testing.T, g *generation, id string, attempt int) (*testpb.AppendResponse, string, error) {
	t.Helper()
	var tr metadata.MD
	files := ""
	if attempt > 0 {
		files = before(g.svc.gen)
	}
	resp, err := g.client.Append(callCtx(t, id, files), &testpb.AppendRequest{Id: id}, grpc.Trailer(&tr))
	how := ""
	if v := tr.Get(ledgerwire.TrailerKey); len(v) > 0 {
		how = v[0]
	}
	return resp, how, err
}

// recordedSize returns the length of the records in the ledger file at
// path (on Linux, the file runs past them, zero-filled).
func recordedSize(t *testing.T, path string) int64 {
	t.Helper()
	n, err := ledger.RecordedSize(path)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
