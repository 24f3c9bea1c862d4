package interceptor_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/grpc-respawn/respawn/interceptor"
	"github.com/grpc-respawn/respawn/internal/plugintest"
	"github.com/grpc-respawn/respawn/internal/respawntest"
	"github.com/grpc-respawn/respawn/internal/testpb"
	"github.com/grpc-respawn/respawn/internal/testplugin"
)

// TestClassifyRealErrors pins today's grpc-go error texts to their class by
// producing each one for real. A grpc upgrade that changes a text fails here
// rather than in a user's backup at 3 a.m.
func TestClassifyRealErrors(t *testing.T) {
	tests := []struct {
		name     string
		produce  func(t *testing.T) error
		wantCode codes.Code
		wantText string
		want     interceptor.Class
	}{
		// The kernel reports the death as EOF or, when unread data was
		// pending, as "connection reset by peer": both texts occur.
		{"plugin killed mid-call", killMidCall, codes.Unavailable, "error reading from server: ", interceptor.MaybeProcessed},
		{"call after the plugin was killed", callAfterKill, codes.Unavailable, "connect: connection refused", interceptor.NeverSent},
		{"socket removed", dialRemovedSocket, codes.Unavailable, "no such file or directory", interceptor.NeverSent},
		{"call after ClientConn.Close", callAfterClose, codes.Canceled, "grpc: the client connection is closing", interceptor.MaybeProcessed},
		{"server GracefulStop", callDuringGracefulStop, codes.Unavailable, "while dialing", interceptor.NeverSent},
		{"server Stop mid-call", stopMidCall, codes.Unavailable, "error reading from server: ", interceptor.MaybeProcessed},
		{"handler returns Unavailable", handlerFails("bucket is read-only"), codes.Unavailable, "bucket is read-only", interceptor.NotConnectionFault},
		// A handler whose own backend failed ran the call: it must be
		// neither retried nor taken for a dead plugin, whatever its text.
		{"handler's backend refused", handlerFails(backendRefused), codes.Unavailable, backendRefused, interceptor.NotConnectionFault},
		{"handler's backend hung up", handlerFails("unexpected EOF"), codes.Unavailable, "unexpected EOF", interceptor.NotConnectionFault},
		// Whichever side sees the deadline first words it.
		{"caller deadline", callerDeadline, codes.DeadlineExceeded, "context deadline exceeded|stream terminated by RST_STREAM with error code: CANCEL", interceptor.NotConnectionFault},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.produce(t)
			t.Logf("grpc-go said: %v", err)
			s := status.Convert(err)
			if s.Code() != tt.wantCode || !containsOneOf(s.Message(), tt.wantText) {
				t.Fatalf("got %v, want code %v with %q: grpc-go's text changed; update the classifier", err, tt.wantCode, tt.wantText)
			}
			if got := interceptor.Classify(err); got != tt.want {
				t.Errorf("Classify(%v) = %v, want %v", err, got, tt.want)
			}
		})
	}
}

// containsOneOf reports whether s contains one of the |-separated texts.
func containsOneOf(s, texts string) bool {
	for _, text := range strings.Split(texts, "|") {
		if strings.Contains(s, text) {
			return true
		}
	}
	return false
}

// TestClassifyTexts covers the texts of grpc-go's that a test cannot easily
// produce (a GOAWAY at the right moment, a keepalive timeout), and the same
// texts quoted further into a handler's own message.
func TestClassifyTexts(t *testing.T) {
	tests := []struct {
		code codes.Code
		msg  string
		want interceptor.Class
	}{
		{codes.Unavailable, `connection error: desc = "transport: Error while dialing: dial unix /tmp/p.sock: connect: connection refused"`, interceptor.NeverSent},
		{codes.Unavailable, `connection error: desc = "transport: authentication handshake failed: EOF"`, interceptor.NeverSent},
		{codes.Unavailable, `connection error: desc = "error reading server preface: EOF"`, interceptor.NeverSent},
		{codes.Unavailable, "the connection is draining", interceptor.NeverSent},
		{codes.Unavailable, "the stream is rejected because server is draining the connection", interceptor.NeverSent},
		{codes.Unavailable, "stream terminated by RST_STREAM with error code: REFUSED_STREAM", interceptor.NeverSent},
		{codes.Unavailable, "name resolver error: produced zero addresses", interceptor.NeverSent},
		{codes.Unavailable, "error reading from server: EOF", interceptor.MaybeProcessed},
		{codes.Unavailable, "error reading from server: read unix @->/tmp/p.sock: read: connection reset by peer", interceptor.MaybeProcessed},
		{codes.Unavailable, `connection error: desc = "error reading from server: EOF"`, interceptor.MaybeProcessed},
		{codes.Unavailable, "transport is closing", interceptor.MaybeProcessed},
		{codes.Unavailable, `connection error: desc = "transport is closing"`, interceptor.MaybeProcessed},
		{codes.Unavailable, `closing transport due to: connection error: desc = "error reading from server: EOF", received prior goaway: code: NO_ERROR, debug data: "max_age"`, interceptor.MaybeProcessed},
		{codes.Unavailable, `closing transport due to: connection error: desc = "error reading from server: EOF", received prior goaway: code: ENHANCE_YOUR_CALM, debug data: "too_many_pings"`, interceptor.MaybeProcessed},
		{codes.Unavailable, "keepalive ping failed to receive ACK within timeout", interceptor.MaybeProcessed},
		{codes.Internal, "server closed the stream without sending trailers", interceptor.MaybeProcessed},
		{codes.Canceled, "grpc: the client connection is closing", interceptor.MaybeProcessed},
		// Not grpc-go's own: a handler's message, or the wrong code.
		{codes.Unavailable, backendRefused, interceptor.NotConnectionFault},
		{codes.Unavailable, "unexpected EOF", interceptor.NotConnectionFault},
		{codes.Unavailable, "EOF", interceptor.NotConnectionFault},
		{codes.Unavailable, "write: broken pipe", interceptor.NotConnectionFault},
		// A plugin killed while grpc-go reconnects (preface written, settings not).
		{codes.Unavailable, "write unix @->/tmp/p.sock: write: broken pipe", interceptor.NeverSent},
		// grpc-go's retry policy, flattened into one message.
		{codes.Unavailable, `max retries exhausted: failed after 3 attempts: rpc error: code = Unavailable desc = error reading from server: EOF`, interceptor.MaybeProcessed},
		{codes.Unavailable, "upstream: transport is closing", interceptor.NotConnectionFault},
		{codes.Unavailable, "transport: bucket is read-only", interceptor.NotConnectionFault},
		{codes.Unavailable, "stream terminated by RST_STREAM with error code: INTERNAL_ERROR", interceptor.NotConnectionFault},
		{codes.Internal, "unexpected EOF", interceptor.NotConnectionFault},
		{codes.Internal, "error reading from server: EOF", interceptor.NotConnectionFault},
		{codes.Canceled, "context canceled", interceptor.NotConnectionFault},
	}
	for _, tt := range tests {
		err := status.Error(tt.code, tt.msg)
		if got := interceptor.Classify(err); got != tt.want {
			t.Errorf("Classify(%v) = %v, want %v", err, got, tt.want)
		}
	}
}

// TestClassifySeesThroughWrappers: grpc-go's retry policy wraps the last
// attempt's error with %w, and so may a host's interceptor.
func TestClassifySeesThroughWrappers(t *testing.T) {
	eof := status.Error(codes.Unavailable, "error reading from server: EOF")
	for _, err := range []error{
		fmt.Errorf("max retries exhausted: failed after 3 attempts: %w", eof),
		fmt.Errorf("objectstore: %w", fmt.Errorf("max retries exhausted: failed after 2 attempts: %w", eof)),
	} {
		if got := interceptor.Classify(err); got != interceptor.MaybeProcessed {
			t.Errorf("Classify(%v) = %v, want %v", err, got, interceptor.MaybeProcessed)
		}
	}
}

func TestClassifyOurOwnErrors(t *testing.T) {
	unknown := &interceptor.OutcomeUnknownError{Method: "/m", Err: status.Error(codes.Unavailable, "error reading from server: EOF")}
	if got := interceptor.Classify(unknown); got != interceptor.NotConnectionFault {
		t.Errorf("Classify(OutcomeUnknownError) = %v, want %v: it must not be retried again", got, interceptor.NotConnectionFault)
	}
	poison := &interceptor.PoisonRequestError{Method: "/m", Deaths: 2, Err: status.Error(codes.Unavailable, "error reading from server: EOF")}
	if got := interceptor.Classify(poison); got != interceptor.NotConnectionFault {
		t.Errorf("Classify(PoisonRequestError) = %v, want %v", got, interceptor.NotConnectionFault)
	}
	if got := interceptor.Classify(errors.New("plain")); got != interceptor.NotConnectionFault {
		t.Errorf("Classify(non-status error) = %v, want %v", got, interceptor.NotConnectionFault)
	}
	if got := interceptor.Classify(nil); got != interceptor.NotConnectionFault {
		t.Errorf("Classify(nil) = %v, want %v", got, interceptor.NotConnectionFault)
	}
}

func dial(t *testing.T, target string) testpb.TestClient {
	t.Helper()
	cc, err := grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return testpb.NewTestClient(cc)
}

// startAndKillMidCall starts the test plugin, makes one call, and kills the plugin
// while a second call is in its handler; it returns that call's error.
func startAndKillMidCall(t *testing.T) (testpb.TestClient, *plugintest.Plugin, error) {
	journal := filepath.Join(t.TempDir(), "journal")
	p := plugintest.Start(t, plugintest.BuildOnce(t), "-journal", journal)
	client := dial(t, p.Addr)
	errc := make(chan error, 1)
	go func() {
		_, err := client.Get(respawntest.Context(t, 10*time.Second), &testpb.GetRequest{Id: "slow", DelayMs: 5000})
		errc <- err
	}()
	h := &host{journal: journal}
	h.waitJournal(t, "slow", 1)
	if err := p.Kill(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = p.Wait()
	return client, p, <-errc
}

func killMidCall(t *testing.T) error {
	_, _, err := startAndKillMidCall(t)
	return err
}

func callAfterKill(t *testing.T) error {
	client, _, _ := startAndKillMidCall(t)
	_, err := client.Get(respawntest.Context(t, 10*time.Second), &testpb.GetRequest{})
	return err
}

func dialRemovedSocket(t *testing.T) error {
	client := dial(t, "unix://"+filepath.Join(t.TempDir(), "gone.sock"))
	_, err := client.Get(respawntest.Context(t, 10*time.Second), &testpb.GetRequest{})
	return err
}

func callAfterClose(t *testing.T) error {
	p := plugintest.Start(t, plugintest.BuildOnce(t))
	cc, err := grpc.NewClient(p.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	_ = cc.Close()
	_, err = testpb.NewTestClient(cc).Get(respawntest.Context(t, 10*time.Second), &testpb.GetRequest{})
	return err
}

// serveInProcess serves the test service on a unix socket in this process.
func serveInProcess(t *testing.T, journal string) (*grpc.Server, string) {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "s.sock")
	s, err := testplugin.ServeUnix(sock, journal)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s, "unix://" + sock
}

func callDuringGracefulStop(t *testing.T) error {
	journal := filepath.Join(t.TempDir(), "journal")
	s, target := serveInProcess(t, journal)
	client := dial(t, target)
	if _, err := client.Get(respawntest.Context(t, 10*time.Second), &testpb.GetRequest{}); err != nil {
		t.Fatal(err)
	}
	inflight := make(chan error, 1)
	go func() {
		_, err := client.Get(respawntest.Context(t, 10*time.Second), &testpb.GetRequest{Id: "inflight", DelayMs: 300})
		inflight <- err
	}()
	(&host{journal: journal}).waitJournal(t, "inflight", 1)
	stopped := make(chan struct{})
	go func() { s.GracefulStop(); close(stopped) }()
	// The listener closes first; a new call must not find a transport.
	_, err := client.Get(respawntest.Context(t, 10*time.Second), &testpb.GetRequest{})
	if e := <-inflight; e != nil {
		t.Errorf("call in flight during GracefulStop: %v, want it to finish", e)
	}
	<-stopped
	if err == nil { // it raced ahead of GracefulStop; the socket is gone now
		_, err = client.Get(respawntest.Context(t, 10*time.Second), &testpb.GetRequest{})
	}
	return err
}

func stopMidCall(t *testing.T) error {
	journal := filepath.Join(t.TempDir(), "journal")
	s, target := serveInProcess(t, journal)
	client := dial(t, target)
	errc := make(chan error, 1)
	go func() {
		_, err := client.Get(respawntest.Context(t, 10*time.Second), &testpb.GetRequest{Id: "slow", DelayMs: 5000})
		errc <- err
	}()
	(&host{journal: journal}).waitJournal(t, "slow", 1)
	s.Stop()
	return <-errc
}

const backendRefused = "dial tcp 10.0.0.1:443: connect: connection refused"

// handlerFails returns a producer of the error of a Fail call whose handler
// returns codes.Unavailable with msg.
func handlerFails(msg string) func(t *testing.T) error {
	return func(t *testing.T) error {
		_, target := serveInProcess(t, "")
		_, err := dial(t, target).Fail(respawntest.Context(t, 10*time.Second), &testpb.FailRequest{Code: uint32(codes.Unavailable), Message: msg})
		return err
	}
}

func callerDeadline(t *testing.T) error {
	_, target := serveInProcess(t, "")
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := dial(t, target).Get(ctx, &testpb.GetRequest{DelayMs: 5000})
	return err
}
