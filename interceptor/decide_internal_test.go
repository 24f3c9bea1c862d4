package interceptor

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/grpc-respawn/respawn/internal/respawntest"
	"github.com/grpc-respawn/respawn/internal/testplugin"
	"github.com/grpc-respawn/respawn/redial"
)

// TestDecide is the classifier's rules, without processes: what a failed
// attempt's error and the evidence about its plugin lead to. Deleting a rule
// of decide fails a row.
func TestDecide(t *testing.T) {
	var (
		eof        = status.Error(codes.Unavailable, "error reading from server: EOF")
		refused    = status.Error(codes.Unavailable, `connection error: desc = "transport: Error while dialing: dial unix /tmp/p.sock: connect: connection refused"`)
		brokenPipe = status.Error(codes.Unavailable, "write unix @->/tmp/p.sock: write: broken pipe")
		draining   = status.Error(codes.Unavailable, "the connection is draining")
		handler    = status.Error(codes.Unavailable, "bucket is read-only")
		notFound   = status.Error(codes.NotFound, "no such key")
		closing    = status.Error(codes.Canceled, "grpc: the client connection is closing")
		cut        = status.Error(codes.Unavailable, `closing transport due to: connection error: desc = "error reading from server: EOF", received prior goaway: code: NO_ERROR, debug data: "max_age"`)
		wrapped    = fmt.Errorf("max retries exhausted: failed after 3 attempts: %w", eof)
		unknown    = &outcomeUnknownError{Method: "/m", Err: eof}
	)
	var (
		none      = evidence{}
		exited    = evidence{exited: true, lost: true}
		lost      = evidence{lost: true}
		exitedNo  = evidence{exited: true, lost: true, reached: reachNo}
		exitedYes = evidence{exited: true, lost: true, reached: reachYes}
	)
	tests := []struct {
		name string
		err  error
		ev   evidence
		want outcome
	}{
		// Without evidence, any status is the live plugin's own.
		{"grpc-go's EOF text from a live plugin", eof, none, outcome{}},
		{"grpc-go's refused text from a live plugin", refused, none, outcome{}},
		{"a handler's Unavailable", handler, none, outcome{}},
		{"draining text from a live transport", draining, none, outcome{}},
		// With it, the table's hint.
		{"died mid-call", eof, exited, outcome{class: maybeProcessed, killed: true}},
		{"transport lost under the call, process alive", eof, lost, outcome{class: maybeProcessed}},
		{"died mid-call, seen through grpc-go's retry", wrapped, exited, outcome{class: maybeProcessed, killed: true}},
		{"GOAWAY from a live plugin", draining, lost, outcome{class: neverSent, live: true}},
		{"GOAWAY text, but the process exited", draining, exited, outcome{class: maybeProcessed}},
		// A call cut after a GOAWAY may have run; the plugin lives if it
		// takes a new connection.
		{"cut after a GOAWAY, the plugin reconnected", cut, evidence{drained: true}, outcome{class: maybeProcessed, live: true}},
		{"cut after a GOAWAY, reconnected, then the process exited", cut, evidence{drained: true, exited: true, lost: true}, outcome{class: maybeProcessed, killed: true}},
		{"cut after a GOAWAY, reconnected, then that connection lost", cut, evidence{drained: true, lost: true}, outcome{class: maybeProcessed, live: true}},
		{"cut after a GOAWAY, no new connection", cut, lost, outcome{class: maybeProcessed}},
		{"cut after a GOAWAY, the process exited", cut, exited, outcome{class: maybeProcessed, killed: true}},
		{"cut after a GOAWAY, no evidence", cut, none, outcome{}},
		// A never-sent text is believed only when the attempt is known not
		// to have reached a transport: a retry layer inside respawn may have
		// sent an earlier attempt.
		{"refused, reach unknown", refused, exited, outcome{class: maybeProcessed}},
		{"refused, no transport reached", refused, exitedNo, outcome{class: neverSent}},
		{"refused, a transport was reached", refused, exitedYes, outcome{class: maybeProcessed, killed: true}},
		{"broken pipe while reconnecting, no transport reached", brokenPipe, exitedNo, outcome{class: neverSent}},
		{"an unfamiliar Unavailable with the plugin dead", handler, exited, outcome{class: maybeProcessed}},
		{"an unfamiliar Unavailable, transport reached, plugin dead", handler, exitedYes, outcome{class: maybeProcessed, killed: true}},
		{"connection closed under the call", closing, lost, outcome{class: maybeProcessed}},
		{"connection closed, no transport reached (released from the picker)", closing, exitedNo, outcome{class: neverSent}},
		// Never a connection fault, whatever the evidence.
		{"NotFound from a plugin that then died", notFound, exited, outcome{}},
		{"respawn's own verdict", unknown, exited, outcome{}},
		{"no error", nil, exited, outcome{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := decide(tt.err, tt.ev); got != tt.want {
				t.Errorf("decide(%v, %+v) = %+v, want %+v", tt.err, tt.ev, got, tt.want)
			}
		})
	}
}

// TestJudgeExitCancelled: an attempt cut short because its plugin's process
// exited becomes an Unavailable, classed by whether it reached a transport;
// the caller's own end is never a connection fault.
func TestJudgeExitCancelled(t *testing.T) {
	exited, cancel := context.WithCancelCause(context.Background())
	cancel(errProcessExited)
	canceled := status.Error(codes.Canceled, "context canceled")
	var p Policy
	for _, tt := range []struct {
		name    string
		reached bool
		want    outcome
	}{
		{"never sent", false, outcome{class: neverSent}},
		{"reached", true, outcome{class: maybeProcessed, killed: true}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a := attempt{actx: exited, pr: reachedPeer(tt.reached)}
			o, err := p.judgeAttempt(respawntest.Context(t, 10*time.Second), nil, a, canceled)
			if o != tt.want {
				t.Errorf("outcome = %+v, want %+v", o, tt.want)
			}
			if status.Code(err) != codes.Unavailable {
				t.Errorf("error = %v, want code Unavailable", err)
			}
		})
	}
	t.Run("caller's ctx done", func(t *testing.T) {
		done, stop := context.WithCancel(respawntest.Context(t, 10*time.Second))
		stop()
		a := attempt{actx: exited, pr: reachedPeer(true)}
		if o, err := p.judgeAttempt(done, nil, a, canceled); o != (outcome{}) || err != canceled {
			t.Errorf("got %+v, %v; want no connection fault and the error as it is", o, err)
		}
	})
}

// TestUnpicked: which failures of grpc-go's own first attempt prove that it
// never got a transport. The closing of the ClientConn does only when redial
// released the connection with no transport left; closed under calls in
// flight (retired), it fails with the same text calls that may have run.
func TestUnpicked(t *testing.T) {
	closing := status.Error(codes.Canceled, "grpc: the client connection is closing")
	refused := status.Error(codes.Unavailable, `connection error: desc = "transport: Error while dialing: dial unix /tmp/p.sock: connect: connection refused"`)
	eof := status.Error(codes.Unavailable, "error reading from server: EOF")
	for _, tt := range []struct {
		name     string
		err      error
		released bool
		want     bool
	}{
		{"closing, released", closing, true, true},
		{"closing, not released", closing, false, false},
		{"dial failure", refused, false, true},
		{"end of a transport, released", eof, true, false},
	} {
		if got := unpicked(tt.err, tt.released); got != tt.want {
			t.Errorf("%s: unpicked = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// FuzzDecide: whatever the error's code and text, decide never panics, and
// without evidence of a death never calls it a connection fault.
func FuzzDecide(f *testing.F) {
	for _, r := range rules {
		f.Add(uint32(r.code), r.text+"EOF", false, false)
		f.Add(uint32(r.code), connErrorPrefix+r.text, true, true)
	}
	f.Add(uint32(codes.Unavailable), retryPrefix+"3 attempts: rpc error: code = Unavailable desc = error reading from server: EOF", true, false)
	f.Add(uint32(codes.Unavailable), "bucket is read-only", false, true)
	f.Fuzz(func(t *testing.T, code uint32, msg string, exited, lost bool) {
		err := status.Error(codes.Code(code), msg)
		o := decide(err, evidence{exited: exited, lost: lost})
		if !exited && !lost && o != (outcome{}) {
			t.Fatalf("decide(%v) without evidence = %+v, want not a connection fault", err, o)
		}
		if o.live && exited {
			t.Fatalf("decide(%v) says a dead plugin lives: %+v", err, o)
		}
		_ = classify(fmt.Errorf("wrapped: %w", err))
	})
}

func reachedPeer(reached bool) *peer.Peer {
	if reached {
		return &peer.Peer{Addr: &net.UnixAddr{Name: "/tmp/p.sock", Net: "unix"}}
	}
	return &peer.Peer{}
}

// TestDrainingKeepsThePlugin: a GOAWAY from a live plugin is retried on the
// same generation, counts as an attempt and respawns nothing; any other
// never-sent failure replaces the generation.
func TestDrainingKeepsThePlugin(t *testing.T) {
	var p Policy // the zero Policy: the defaults
	rc, h, sock := inProcessConn(t, &p)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	drained := status.Error(codes.Unavailable, "the stream is rejected because server is draining the connection")
	goaway := outcome{class: neverSent, live: true}
	r := &retrier{p: &p, h: h, method: "/m", attempt: 1}
	g := rc.Current()
	for want := 2; want <= defaultMaxAttempts; want++ {
		ng, err := r.after(ctx, nil, g, goaway, drained, standing{again: true})
		if err != nil || ng != g {
			t.Fatalf("attempt %d after a GOAWAY: got generation %v, %v; want the same one", want, ng, err)
		}
		if r.attempt != want {
			t.Errorf("attempt = %d, want %d", r.attempt, want)
		}
	}
	if _, err := r.after(ctx, nil, g, goaway, drained, standing{again: true}); !errors.Is(err, drained) {
		t.Errorf("after %d attempts: got %v, want the GOAWAY's error", defaultMaxAttempts, err)
	}
	if n := rc.Stats().Respawns; n != 0 {
		t.Errorf("respawns after GOAWAYs = %d, want 0", n)
	}

	refused := status.Error(codes.Unavailable, `connection error: desc = "transport: Error while dialing: dial unix `+sock+`: connect: connection refused"`)
	r = &retrier{p: &p, h: h, method: "/m", attempt: 1}
	ng, err := r.after(ctx, nil, g, outcome{class: neverSent}, refused, standing{again: true})
	if err != nil || ng == g {
		t.Fatalf("after a refused dial: got generation %v, %v; want a new one", ng, err)
	}
	if n := rc.Stats().Respawns; n != 1 {
		t.Errorf("respawns after a refused dial = %d, want 1", n)
	}
}

// inProcessConn returns a connected Conn with p's policy, to a testpb
// server in this process, its Handle and the server's socket.
func inProcessConn(t *testing.T, p *Policy) (*redial.Conn, redial.Handle, string) {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "s.sock")
	srv, err := testplugin.ServeUnix(sock, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	hook := respawntest.RespawnerFunc(func(context.Context, redial.Request) (redial.Backend, error) {
		return redial.Backend{Target: "unix://" + sock}, nil
	})
	var h redial.Handle
	rc, err := redial.New(hook, redial.WithPolicy(respawntest.StartFunc(func(hh redial.Handle) redial.Binding {
		h = hh
		return p.Start(hh)
	})))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rc.Close() })
	if err := rc.Connect(respawntest.Context(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	return rc, h, sock
}

// TestJudgeCallerGaveUp: once the caller's ctx has ended, grpc-go's text of
// a call that may have run, with no evidence of a death, is neither the
// plugin's own (a retry layer outside would run it again) nor a death
// (nothing to replace): maybe processed, plugin kept; and a call that may
// have run and is not idempotent is an outcome unknown, not given up.
func TestJudgeCallerGaveUp(t *testing.T) {
	var p Policy
	rc, h, _ := inProcessConn(t, &p)
	a := attempt{g: rc.Current()}
	done, stop := context.WithCancel(respawntest.Context(t, 10*time.Second))
	stop()
	for _, tt := range []struct {
		name string
		err  error
		want outcome
	}{
		{"grpc-go's text", status.Error(codes.Unavailable, "error reading from server: EOF"), outcome{class: maybeProcessed, live: true}},
		{"a handler's Unavailable", status.Error(codes.Unavailable, "bucket is read-only"), outcome{}},
		{"the caller's cancellation", status.Error(codes.Canceled, "context canceled"), outcome{}},
		{"refused, no transport reached", status.Error(codes.Unavailable, `connection error: desc = "transport: Error while dialing: dial unix /tmp/p.sock: connect: connection refused"`), outcome{}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a := a
			if strings.Contains(tt.name, "no transport reached") {
				a.pr = reachedPeer(false)
			}
			if o, _ := p.judgeAttempt(done, h, a, tt.err); o != tt.want {
				t.Errorf("outcome = %+v, want %+v", o, tt.want)
			}
		})
	}
	t.Run("cut after a GOAWAY, connection lost", func(t *testing.T) {
		// Closed: lost; its reconnect is not waited for.
		cut := status.Error(codes.Unavailable, `closing transport due to: connection error: desc = "error reading from server: EOF", received prior goaway: code: NO_ERROR, debug data: "max_age"`)
		_ = rc.Close()
		want := outcome{class: maybeProcessed, live: true}
		if o, _ := p.judgeAttempt(done, h, a, cut); o != want {
			t.Errorf("outcome = %+v, want %+v", o, want)
		}
	})
	for _, tt := range []struct {
		name  string
		class faultClass
		opts  []grpc.CallOption
		want  verdict
	}{
		{"maybe processed, not idempotent", maybeProcessed, nil, unknown},
		{"maybe processed, idempotent", maybeProcessed, []grpc.CallOption{Idempotent(true)}, giveUp},
		{"never sent", neverSent, nil, giveUp},
		{"not a connection fault", notConnectionFault, nil, giveUp},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := p.judge(done, "/m", nil, tt.opts, tt.class); got != tt.want {
				t.Errorf("judge = %v, want %v", got, tt.want)
			}
		})
	}
}
