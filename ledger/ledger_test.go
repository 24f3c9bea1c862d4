//go:build unix

package ledger_test

import (
	"context"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"os"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/grpc-respawn/respawn/internal/ledgerwire"
	"github.com/grpc-respawn/respawn/internal/testpb"
	"github.com/grpc-respawn/respawn/ledger"
)

const appendMethod = "/respawn.test.v1.Test/Append"

// TestRetryAnswers: a retry on the second generation of a call the first
// one had, answered from the first one's ledger.
func TestRetryAnswers(t *testing.T) {
	failed := status.New(codes.FailedPrecondition, "no room")
	failed, err := failed.WithDetails(&testpb.AppendRequest{Id: "detail"})
	if err != nil {
		t.Fatal(err)
	}
	knows := func(_ context.Context, method, id string, _ any) (any, bool) {
		return &testpb.AppendResponse{Pid: 99, Id: id}, method == appendMethod
	}
	cannotTell := func(context.Context, string, string, any) (any, bool) { return nil, false }
	tests := []struct {
		name string
		// first is generation 1's Append handler; nil answers at once.
		first func(context.Context, *testpb.AppendRequest) (*testpb.AppendResponse, error)
		// interrupted leaves generation 1's call in its handler.
		interrupted  bool
		cfg1, cfg2   ledger.Config
		attempt      int // of the call on generation 2
		wantCode     codes.Code
		wantStatus   *status.Status // if set, the whole status
		wantTrailer  string
		wantPid      int64 // of an OK response
		wantRuns2    int64 // runs of generation 2's handler
		wantRecorded bool  // generation 2's ledger holds records afterwards
	}{
		{name: "completed: the recorded response", attempt: 1, wantTrailer: ledgerwire.Replayed, wantPid: 1},
		{
			name:    "completed with an error: the recorded status, details kept",
			first:   func(context.Context, *testpb.AppendRequest) (*testpb.AppendResponse, error) { return nil, failed.Err() },
			attempt: 1, wantCode: codes.FailedPrecondition, wantStatus: failed, wantTrailer: ledgerwire.Replayed,
		},
		{name: "in its handler: interrupted", interrupted: true, attempt: 1, wantCode: codes.Unknown, wantTrailer: ledgerwire.Interrupted},
		{
			name: "in its handler, a resolver knows: its answer", interrupted: true, attempt: 1,
			cfg2:    ledger.Config{Resolvers: map[string]func(context.Context, string, string, any) (any, bool){appendMethod: knows}},
			wantPid: 99, wantRecorded: true, wantTrailer: ledgerwire.Resolved,
		},
		{
			name: "in its handler, the resolver cannot tell: interrupted", interrupted: true, attempt: 1,
			cfg2:     ledger.Config{Resolvers: map[string]func(context.Context, string, string, any) (any, bool){appendMethod: cannotTell}},
			wantCode: codes.Unknown, wantTrailer: ledgerwire.Interrupted,
		},
		{
			name: "in its handler, a resolver of another method: interrupted", interrupted: true, attempt: 1,
			cfg2:     ledger.Config{Resolvers: map[string]func(context.Context, string, string, any) (any, bool){"/respawn.test.v1.Test/Other": knows}},
			wantCode: codes.Unknown, wantTrailer: ledgerwire.Interrupted,
		},
		{name: "completed, response over MaxResponse: lost", cfg1: ledger.Config{MaxResponse: 3}, attempt: 1, wantCode: codes.DataLoss, wantTrailer: ledgerwire.ResponseLost},
		{name: "completed, no responses kept: lost", cfg1: ledger.Config{MaxResponse: -1}, attempt: 1, wantCode: codes.DataLoss, wantTrailer: ledgerwire.ResponseLost},
		{name: "completed, fsync'd: the recorded response", cfg1: ledger.Config{Sync: true}, attempt: 1, wantTrailer: ledgerwire.Replayed, wantPid: 1},
		{name: "a first attempt is not looked up: it runs", attempt: 0, wantPid: 2, wantRuns2: 1, wantRecorded: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := privateDir(t)
			b := newBlocker()
			first := tt.first
			if tt.interrupted {
				first = b.handler
			}
			g1 := serve(t, dir, 1, tt.cfg1, &service{appendFn: first})
			var wg sync.WaitGroup
			defer wg.Wait()
			defer close(b.release)
			if tt.interrupted {
				wg.Add(1)
				go func() { defer wg.Done(); _, _, _ = appendCall(t, g1, "call-1", 0) }()
				b.wait(t)
			} else {
				_, _, _ = appendCall(t, g1, "call-1", 0)
			}
			g2 := serve(t, dir, 2, tt.cfg2, nil)

			resp, how, err := appendCall(t, g2, "call-1", tt.attempt)
			if got := status.Code(err); got != tt.wantCode {
				t.Fatalf("retry on generation 2: %v, want code %v", err, tt.wantCode)
			}
			if tt.wantStatus != nil && !proto.Equal(status.Convert(err).Proto(), tt.wantStatus.Proto()) {
				t.Errorf("retry's status = %v, want %v", status.Convert(err).Proto(), tt.wantStatus.Proto())
			}
			if err == nil && (resp.GetPid() != tt.wantPid || resp.GetId() != "call-1") {
				t.Errorf("retry's response = %v, want Pid %d, Id call-1", resp, tt.wantPid)
			}
			if how != tt.wantTrailer {
				t.Errorf("trailer %s = %q, want %q", ledgerwire.TrailerKey, how, tt.wantTrailer)
			}
			if got := g2.svc.runs.Load(); got != tt.wantRuns2 {
				t.Errorf("generation 2's handler ran %d times, want %d", got, tt.wantRuns2)
			}
			if got := recordedSize(t, g2.ledger) > g2.opened; got != tt.wantRecorded {
				t.Errorf("generation 2's ledger holds records: %v, want %v", got, tt.wantRecorded)
			}
		})
	}
}

// TestResolverAnswerRecorded: once a resolver answered, a retry after the
// death of the plugin that asked it gets that answer from its ledger.
func TestResolverAnswerRecorded(t *testing.T) {
	dir := privateDir(t)
	b := newBlocker()
	g1 := serve(t, dir, 1, ledger.Config{}, &service{appendFn: b.handler})
	var wg sync.WaitGroup
	defer wg.Wait()
	defer close(b.release)
	wg.Add(1)
	go func() { defer wg.Done(); _, _, _ = appendCall(t, g1, "call-1", 0) }()
	b.wait(t)

	var asked int
	resolve := func(_ context.Context, _, id string, _ any) (any, bool) {
		asked++
		return &testpb.AppendResponse{Pid: 99, Id: id}, true
	}
	g2 := serve(t, dir, 2, ledger.Config{Resolvers: map[string]func(context.Context, string, string, any) (any, bool){appendMethod: resolve}}, nil)
	if _, _, err := appendCall(t, g2, "call-1", 1); err != nil {
		t.Fatalf("retry on generation 2: %v", err)
	}
	g3 := serve(t, dir, 3, ledger.Config{}, nil)
	resp, how, err := appendCall(t, g3, "call-1", 1)
	if err != nil || resp.GetPid() != 99 || how != ledgerwire.Replayed {
		t.Errorf("retry on generation 3 = %v, %v, trailer %q; want the resolver's answer (Pid 99), replayed", resp, err, how)
	}
	if asked != 1 || g3.svc.runs.Load() != 0 {
		t.Errorf("resolver asked %d times, generation 3's handler ran %d; want 1 and 0", asked, g3.svc.runs.Load())
	}
}

// TestRetryOnItsOwnPlugin: a retry that names the plugin's own ledger, which
// respawn's host never sends (it names dead plugins' files only), is refused
// unrun, so that forwarded metadata cannot make a plugin answer one call
// with another's record.
func TestRetryOnItsOwnPlugin(t *testing.T) {
	g := serve(t, privateDir(t), 1, ledger.Config{}, nil)
	if _, _, err := appendCall(t, g, "call-1", 0); err != nil {
		t.Fatal(err)
	}
	var tr metadata.MD
	_, err := g.client.Append(callCtx(t, "call-1", "1.ledger"), &testpb.AppendRequest{Id: "call-1"}, grpc.Trailer(&tr))
	if status.Code(err) != codes.InvalidArgument || len(tr.Get(ledgerwire.TrailerKey)) == 0 || tr.Get(ledgerwire.TrailerKey)[0] != ledgerwire.Unreadable {
		t.Errorf("retry naming its own ledger = %v, trailer %v; want InvalidArgument, %q", err, tr, ledgerwire.Unreadable)
	}
	if got := g.svc.runs.Load(); got != 1 {
		t.Errorf("handler ran %d times, want 1", got)
	}
}

// TestNoRecordRuns: a retry that no ledger knows runs, recorded.
func TestNoRecordRuns(t *testing.T) {
	dir := privateDir(t)
	serve(t, dir, 1, ledger.Config{}, nil)
	g2 := serve(t, dir, 2, ledger.Config{}, nil)
	resp, how, err := appendCall(t, g2, "never-seen", 1)
	if err != nil || resp.GetPid() != 2 || how != "" {
		t.Errorf("retry = %v, %v, trailer %q; want generation 2's answer, no trailer", resp, err, how)
	}
	if recordedSize(t, g2.ledger) == g2.opened {
		t.Error("generation 2's ledger is empty, want the call's records")
	}
}

// TestTornCompletion: a completed record torn by its plugin's death (its write(2) cut short) leaves
// the call started, not completed.
func TestTornCompletion(t *testing.T) {
	dir := privateDir(t)
	g1 := serve(t, dir, 1, ledger.Config{}, nil)
	if _, _, err := appendCall(t, g1, "call-1", 0); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(g1.ledger, recordedSize(t, g1.ledger)-3); err != nil {
		t.Fatal(err)
	}
	g2 := serve(t, dir, 2, ledger.Config{}, nil)
	_, how, err := appendCall(t, g2, "call-1", 1)
	if status.Code(err) != codes.Unknown || how != ledgerwire.Interrupted {
		t.Errorf("retry = %v, trailer %q; want codes.Unknown, interrupted", err, how)
	}
}

// TestResponseSizeBound: a response of MaxResponse bytes is kept, whole,
// and one a byte larger is not; large frames are read back as written.
func TestResponseSizeBound(t *testing.T) {
	big := &testpb.AppendResponse{Id: strings.Repeat("x", 300<<10)}
	size := proto.Size(big)
	tests := []struct {
		name     string
		max      int
		wantCode codes.Code
	}{
		{"at the bound", size, codes.OK},
		{"over it by a byte", size - 1, codes.DataLoss},
		{"under the default 1 MiB", 0, codes.OK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := privateDir(t)
			g1 := serve(t, dir, 1, ledger.Config{MaxResponse: tt.max}, &service{appendFn: func(context.Context, *testpb.AppendRequest) (*testpb.AppendResponse, error) {
				return big, nil
			}})
			if _, _, err := appendCall(t, g1, "call-1", 0); err != nil {
				t.Fatal(err)
			}
			g2 := serve(t, dir, 2, ledger.Config{}, nil)
			resp, _, err := appendCall(t, g2, "call-1", 1)
			if got := status.Code(err); got != tt.wantCode {
				t.Fatalf("retry of a %d-byte response with MaxResponse %d: %v, want code %v", size, tt.max, err, tt.wantCode)
			}
			if err == nil && !proto.Equal(resp, big) {
				t.Errorf("retry's response is %d bytes, not the %d recorded", proto.Size(resp), size)
			}
		})
	}
}

// TestRetryTypedNilResponse: a handler that returns a typed nil response
// and no error gives its caller an empty message (grpc-go encodes it as
// zero bytes); a retry of it is answered the same, from the record.
func TestRetryTypedNilResponse(t *testing.T) {
	dir := privateDir(t)
	g1 := serve(t, dir, 1, ledger.Config{}, &service{appendFn: func(context.Context, *testpb.AppendRequest) (*testpb.AppendResponse, error) {
		return nil, nil // (*testpb.AppendResponse)(nil)
	}})
	first, _, err := appendCall(t, g1, "call-1", 0)
	if err != nil {
		t.Fatalf("first attempt: %v", err)
	}
	g2 := serve(t, dir, 2, ledger.Config{}, nil)
	resp, how, err := appendCall(t, g2, "call-1", 1)
	if err != nil || how != ledgerwire.Replayed {
		t.Fatalf("retry = %v, trailer %q; want the empty success, replayed", err, how)
	}
	if !proto.Equal(resp, first) || proto.Size(resp) != 0 {
		t.Errorf("retry's response = %v; want the first attempt's, %v, empty", resp, first)
	}
	if got := g2.svc.runs.Load(); got != 0 {
		t.Errorf("generation 2's handler ran %d times, want 0", got)
	}
}
