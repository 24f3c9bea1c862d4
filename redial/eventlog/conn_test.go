package eventlog_test

import (
	"context"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/logging"
	"go.uber.org/goleak"
	"google.golang.org/grpc"

	"github.com/grpc-respawn/respawn/interceptor"
	"github.com/grpc-respawn/respawn/internal/plugintest"
	"github.com/grpc-respawn/respawn/internal/respawntest"
	"github.com/grpc-respawn/respawn/internal/testpb"
	"github.com/grpc-respawn/respawn/redial"
	"github.com/grpc-respawn/respawn/redial/command"
	"github.com/grpc-respawn/respawn/redial/eventlog"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// lines is a logging.Logger that keeps every line, safe for concurrent use.
type lines struct {
	mu     sync.Mutex
	all    []line
	closed chan struct{} // closed with the line of redial.EventClosed, the last
}

func (ls *lines) Log(ctx context.Context, level logging.Level, msg string, fields ...any) {
	m := make(map[string]any)
	for i := 0; i+1 < len(fields); i += 2 {
		k, _ := fields[i].(string)
		m[k] = fields[i+1]
	}
	ls.mu.Lock()
	defer ls.mu.Unlock()
	ls.all = append(ls.all, line{ctx, level, msg, m})
	if m["respawn.event"] == string(redial.EventClosed) {
		close(ls.closed)
	}
}

// find returns the lines whose respawn.event is kind.
func (ls *lines) find(kind redial.EventKind) []line {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	var got []line
	for _, l := range ls.all {
		if l.fields["respawn.event"] == string(kind) {
			got = append(got, l)
		}
	}
	return got
}

// TestHandlerWithConn: a real plugin SIGKILLed in the middle of a call,
// told through eventlog: the log names the plugin, the signal, that nobody
// in the host asked for it, how long the respawn took and which call was
// retried, with the fields mw's logging interceptor put in the call's ctx.
func TestHandlerWithConn(t *testing.T) {
	bin := plugintest.BuildOnce(t)
	journal := filepath.Join(t.TempDir(), "journal")
	log := &lines{closed: make(chan struct{})}
	callLogger := logging.LoggerFunc(func(context.Context, logging.Level, string, ...any) {})
	rc, err := redial.New(&command.Hook{Path: bin, Args: []string{"-journal", journal}},
		redial.WithName("objectstore"),
		redial.WithDialOptions(grpc.WithChainUnaryInterceptor(logging.UnaryClientInterceptor(callLogger))),
		redial.WithPolicy(interceptor.New()),
		redial.WithEventHandler(eventlog.Handler(log)))
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	ctx := respawntest.Context(t, 30*time.Second)
	if err := rc.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	dead := rc.Current()
	callCtx := logging.InjectFields(ctx, logging.Fields{"request.id", "req-1"})
	errc := make(chan error, 1)
	go func() {
		_, err := testpb.NewTestClient(rc).Get(callCtx, &testpb.GetRequest{Id: "r", DelayMs: 1000})
		errc <- err
	}()
	if err := plugintest.WaitJournal(ctx, journal, func(j map[string]int) bool { return j["r"] > 0 }); err != nil {
		t.Fatal(err)
	}
	respawntest.Kill(t, dead)
	if err := <-errc; err != nil {
		t.Fatalf("Get killed mid-call: %v", err)
	}
	if err := rc.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-log.closed: // the handler has seen every event
	case <-ctx.Done():
		t.Fatal("no closed line")
	}

	exits := log.find(redial.EventExit)
	if len(exits) != 2 {
		t.Fatalf("%d exit lines, want 2 (the kill, the Close)", len(exits))
	}
	crash := exits[0]
	if crash.level != logging.LevelWarn || crash.fields["respawn.plugin"] != "objectstore" ||
		crash.fields["respawn.pid"] != int64(dead.Process().PID) || crash.fields["respawn.signal"] != int64(syscall.SIGKILL) ||
		crash.fields["respawn.reason"] != "crashed" || crash.fields["respawn.generation"] != uint64(1) {
		t.Errorf("the kill logged %v %q %v, want a warning naming objectstore, pid %d, signal 9, crashed, generation 1",
			crash.level, crash.msg, crash.fields, dead.Process().PID)
	}
	if closed := exits[1]; closed.level != logging.LevelInfo || closed.fields["respawn.reason"] != "closed" {
		t.Errorf("the Close logged %v %v, want info, closed", closed.level, closed.fields)
	}

	var respawned bool
	for _, l := range log.find(redial.EventRespawnDone) {
		if l.fields["respawn.generation"] == uint64(2) {
			respawned = true
			if ms, ok := l.fields["respawn.duration_ms"].(float64); !ok || ms <= 0 || l.level != logging.LevelInfo {
				t.Errorf("the respawn logged %v %v, want info with a duration", l.level, l.fields)
			}
		}
	}
	if !respawned {
		t.Error("no line for the respawn to generation 2")
	}

	retries := log.find(redial.EventRetry)
	if len(retries) != 1 {
		t.Fatalf("%d retry lines, want 1", len(retries))
	}
	r := retries[0]
	for k, want := range map[string]any{
		logging.ServiceFieldKey:    "respawn.test.v1.Test",
		logging.MethodFieldKey:     "Get",
		logging.ComponentFieldKey:  "client",
		logging.MethodTypeFieldKey: "unary", // from the ctx mw's logging interceptor made
		"request.id":               "req-1", // from the caller's ctx
		"respawn.attempt":          int64(2),
		"respawn.plugin":           "objectstore",
	} {
		if got := r.fields[k]; got != want {
			t.Errorf("retry line: %s = %#v, want %#v", k, got, want)
		}
	}
	if got := logging.ExtractFields(r.ctx); len(got) == 0 {
		t.Error("the retry line was not logged with the call's ctx")
	}
}
