// Package testplugin implements the testpb.Test service. The testplugin
// binary serves it from a real child process; benchmarks can also serve it
// in-process (for example over bufconn) to measure the library without
// process overhead.
package testplugin

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/grpc-respawn/respawn/internal/ledgerwire"
	"github.com/grpc-respawn/respawn/internal/testpb"
)

// HealthService is the health-check service name the plugin reports as
// SERVING, in addition to the overall "" service.
const HealthService = "plugin"

// Server implements testpb.TestServer. Create it with New.
type Server struct {
	testpb.UnimplementedTestServer

	journal    string
	pid        int64
	executions atomic.Int64

	// Upstream, if set, makes Get, Put and Append call Upstream.Get with
	// the same id and delay once they have recorded the call, and return
	// its error unchanged: a plugin in front of a gRPC backend, whose own
	// errors carry grpc-go's transport texts from a live process.
	Upstream testpb.TestClient
	// DieOn, if not empty, makes a Get whose key it is end this very
	// process once it has recorded the call, as Go's runtime does when
	// memory runs out (exit code 2): a request that kills every plugin
	// that runs it.
	DieOn string
	// BusyHealth, if positive, makes every grpc.health.v1 Check spin a CPU
	// that long before it answers: a plugin that is busy but alive, whose
	// checks time out while its process runs.
	BusyHealth time.Duration
	// HungHealth makes every grpc.health.v1 Check block until the
	// process ends: a deadlocked plugin, whose handlers never return
	// while its transport still reads and answers frames.
	HungHealth bool
	// CollectAnswerAfter, if positive, makes Collect answer and end its
	// stream once it has that many messages, without waiting for the
	// client to close its side: a plugin that ends a stream early.
	CollectAnswerAfter int64
	// CollectRefuseAfter, if positive, makes Collect end its stream with
	// Unavailable and grpc-go's "connection refused" text once it has that
	// many messages, before any header: a plugin that proxies a server
	// that is down.
	CollectRefuseAfter int64
	// EchoEndAfter, if positive, makes Echo end its stream with Aborted,
	// and the trailer "echoed: <n>", once it has answered that many
	// messages, without waiting for the client to close its side; it
	// journals "<first id>/ended" first.
	EchoEndAfter int64
	// HeaderPID makes Watch, Collect and Echo send the header "pid: <pid>"
	// as they start, before any message: a header that a test can tell
	// from the one of another process.
	HeaderPID bool
	// InAppend, if set, is called by Append once it has journaled the
	// execution, before it answers: a test plugin kills itself there, in
	// its handler.
	InAppend func()
	// InUpload, if set, is called by Upload with the number of chunks it
	// has received, after each: a test plugin kills itself there.
	InUpload func(chunks int)

	mu     sync.Mutex
	values map[string]string
}

// New returns a Server whose Append journals to journalPath. The journal
// lives outside the process so that executions survive a plugin crash and
// can be counted across restarts. An empty journalPath disables journaling
// (Append then only counts in memory), which suits in-process benchmarks.
func New(journalPath string) *Server {
	return &Server{
		journal: journalPath,
		pid:     int64(os.Getpid()),
		values:  make(map[string]string),
	}
}

// Register registers srv and a health service reporting SERVING for "" and
// HealthService on s. It returns the health server so the caller can report
// NOT_SERVING (health.Server.Shutdown) before stopping.
func Register(s grpc.ServiceRegistrar, srv *Server) *health.Server {
	testpb.RegisterTestServer(s, srv)
	hs := health.NewServer()
	hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	hs.SetServingStatus(HealthService, healthpb.HealthCheckResponse_SERVING)
	switch {
	case srv.HungHealth:
		healthpb.RegisterHealthServer(s, hungHealth{hs})
	case srv.BusyHealth > 0:
		healthpb.RegisterHealthServer(s, busyHealth{hs, srv.BusyHealth})
	default:
		healthpb.RegisterHealthServer(s, hs)
	}
	return hs
}

// busyHealth is a health service whose Check works d on a CPU first.
type busyHealth struct {
	*health.Server
	d time.Duration
}

func (b busyHealth) Check(ctx context.Context, req *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	for end := time.Now().Add(b.d); time.Now().Before(end); {
	}
	return b.Server.Check(ctx, req)
}

// hungHealth is a health service whose Check never returns.
type hungHealth struct{ *health.Server }

func (hungHealth) Check(context.Context, *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	select {} // a lock never released
}

// Get returns the value stored by Put for req.Key in this process.
func (s *Server) Get(ctx context.Context, req *testpb.GetRequest) (*testpb.GetResponse, error) {
	if s.DieOn != "" && req.GetKey() == s.DieOn {
		_ = s.record(req.GetId())
		// As Go's runtime ends a process whose allocation fails.
		fmt.Fprintln(os.Stderr, "fatal error: runtime: out of memory")
		os.Exit(2)
	}
	if err := s.started(ctx, req.GetId(), req.GetDelayMs()); err != nil {
		return nil, err
	}
	s.mu.Lock()
	v, ok := s.values[req.GetKey()]
	s.mu.Unlock()
	return &testpb.GetResponse{Pid: s.pid, Id: req.GetId(), Value: v, Found: ok}, nil
}

// Put stores req.Value under req.Key in this process's memory.
func (s *Server) Put(ctx context.Context, req *testpb.PutRequest) (*testpb.PutResponse, error) {
	if err := s.started(ctx, req.GetId(), req.GetDelayMs()); err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.values[req.GetKey()] = req.GetValue()
	s.mu.Unlock()
	return &testpb.PutResponse{Pid: s.pid, Id: req.GetId()}, nil
}

// Append, like every method given an id, records the execution before the delay, so an execution counts even
// if the process dies or the call is cancelled mid-handler: that is exactly
// the case a non-idempotent retry must not repeat.
func (s *Server) Append(ctx context.Context, req *testpb.AppendRequest) (*testpb.AppendResponse, error) {
	if err := s.recordCall(ctx, req.GetId()); err != nil {
		return nil, status.Errorf(codes.Internal, "journal: %v", err)
	}
	n := s.executions.Add(1)
	if s.InAppend != nil {
		s.InAppend()
	}
	if s.Upstream != nil {
		if err := s.forward(ctx, req.GetId(), req.GetDelayMs()); err != nil {
			return nil, err
		}
	} else if err := sleep(ctx, req.GetDelayMs()); err != nil {
		return nil, err
	}
	return &testpb.AppendResponse{Pid: s.pid, Id: req.GetId(), Executions: n}, nil
}

// MetaSuffix names the journal of replays: for a call whose metadata says
// it is a retry or carries a call id (interceptor.CallIDKey, or else the
// ledger's id, as ledger.CallID gives it), a line "<id> <attempt> <call
// id>" in the file named as the journal plus MetaSuffix.
const MetaSuffix = ".meta"

// ReceivedSuffix names the journal of what Collect received: when it
// answers a stream whose first message has an id, a line "<id> <seqs>",
// the seq of every message it received in order, comma-separated, in the
// file named as the journal plus ReceivedSuffix.
const ReceivedSuffix = ".received"

// The metadata keys of respawn's interceptor (a retry's attempt count, and
// interceptor.CallIDKey; the plugin does not import the library).
const (
	attemptKey = "x-retry-attempt"
	callIDKey  = "x-respawn-call-id"
)

// recordCall records a call's execution, and in the replay journal its
// attempt and call id if it has them.
// The replay line is written first: once the journal shows the call, a
// test may kill the plugin.
func (s *Server) recordCall(ctx context.Context, id string) error {
	if s.journal == "" {
		return nil // nothing to record in: the call's metadata is not read
	}
	md, _ := metadata.FromIncomingContext(ctx)
	attempt, callID := first(md.Get(attemptKey)), first(md.Get(callIDKey))
	if callID == "-" {
		callID = first(md.Get(ledgerwire.IDKey)) // as ledger.CallID gives it
	}
	if attempt != "-" || callID != "-" {
		if err := appendLine(s.journal+MetaSuffix, id+" "+attempt+" "+callID); err != nil {
			return err
		}
	}
	return s.record(id)
}

func first(vs []string) string {
	if len(vs) == 0 {
		return "-"
	}
	return vs[0]
}

// record appends one "<id>\n" line to the journal.
func (s *Server) record(id string) error {
	if s.journal == "" {
		return nil
	}
	return appendLine(s.journal, id)
}

// appendLine appends line and a newline to the file at path. O_APPEND
// keeps lines whole when several processes (an old and a new plugin) write
// concurrently. Once the write has returned the line is in the page cache,
// where it survives a SIGKILL right after; no fsync is needed for that,
// only for a power loss, which no test makes.
func appendLine(path, line string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	// One write per line: O_APPEND makes a single write atomic.
	if _, err := f.WriteString(line + "\n"); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// Fail returns exactly the requested status. It lets tests check that a
// handler's own Unavailable is not mistaken for a dead plugin.
func (s *Server) Fail(ctx context.Context, req *testpb.FailRequest) (*testpb.FailResponse, error) {
	if err := sleep(ctx, req.GetDelayMs()); err != nil {
		return nil, err
	}
	return nil, status.Error(codes.Code(req.GetCode()), req.GetMessage())
}

// started journals a call with a non-empty id as it enters its handler, then
// waits out its delay, or forwards it to Upstream. Tests read the journal to
// know a call is in flight before they kill the plugin.
func (s *Server) started(ctx context.Context, id string, delayMs int64) error {
	if id != "" {
		if err := s.recordCall(ctx, id); err != nil {
			return status.Errorf(codes.Internal, "journal: %v", err)
		}
	}
	if s.Upstream != nil {
		return s.forward(ctx, id, delayMs)
	}
	return sleep(ctx, delayMs)
}

// forward calls Upstream.Get and returns its error as it is.
func (s *Server) forward(ctx context.Context, id string, delayMs int64) error {
	_, err := s.Upstream.Get(ctx, &testpb.GetRequest{Id: id, DelayMs: delayMs})
	return err
}

// sleep waits ms milliseconds or until ctx ends, whichever is first, and
// returns ctx's error as a gRPC status (Canceled or DeadlineExceeded).
func sleep(ctx context.Context, ms int64) error {
	if ms <= 0 {
		return nil
	}
	t := time.NewTimer(time.Duration(ms) * time.Millisecond)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return status.FromContextError(ctx.Err()).Err()
	}
}
