//go:build unix

package ledger_test

import (
	"io"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/grpc-respawn/respawn/internal/ledgerwire"
	"github.com/grpc-respawn/respawn/internal/testpb"
	"github.com/grpc-respawn/respawn/ledger"
)

// uploadService is a generation's Test service with an Upload that counts
// its runs and answers with the bytes it received.
type uploadService struct{ service }

func (s *uploadService) Upload(st grpc.ClientStreamingServer[testpb.UploadRequest, testpb.UploadResponse]) error {
	s.runs.Add(1)
	var size int64
	for {
		req, err := st.Recv()
		if err == io.EOF {
			return st.SendAndClose(&testpb.UploadResponse{Pid: s.gen, Size: size})
		}
		if err != nil {
			return err
		}
		size += int64(len(req.GetData()))
	}
}

// uploadCall uploads chunks of 10 bytes with the metadata kv and returns
// the response, the x-respawn-ledger trailer and the error.
func uploadCall(t *testing.T, cc *grpc.ClientConn, chunks int, kv ...string) (*testpb.UploadResponse, string, error) {
	t.Helper()
	st, err := testpb.NewTestClient(cc).Upload(callCtxMD(t, kv...))
	if err != nil {
		t.Fatal(err)
	}
	for range chunks {
		if err := st.Send(&testpb.UploadRequest{Data: make([]byte, 10)}); err != nil {
			break
		}
	}
	resp, err := st.CloseAndRecv()
	how := ""
	if v := st.Trailer().Get(ledgerwire.TrailerKey); len(v) > 0 {
		how = v[0]
	}
	return resp, how, err
}

// TestClientStreams: a client stream with a ledger id is recorded and its
// retry answered from the record, whether or not the host sends it all
// again; a retry that says not what was sent, or that the ledgers know
// nothing of and the host cannot send again, is not run; a bidirectional
// stream is not recorded.
func TestClientStreams(t *testing.T) {
	dir := privateDir(t)
	svc1, svc2 := &uploadService{}, &uploadService{}
	svc1.gen, svc2.gen = 1, 2
	path1 := dir + "/" + ledgerwire.FileName(1)
	launch(t, path1)
	cc1 := listen(t, svc1, ledger.ServerOptions(ledger.Config{})...)
	launch(t, dir+"/"+ledgerwire.FileName(2))
	cc2 := listen(t, svc2, ledger.ServerOptions(ledger.Config{})...)
	ledger.ForgetOpened()
	first := ledgerwire.Sent{Digest: 1, Length: 36}.String()

	if resp, _, err := uploadCall(t, cc1, 3, ledgerwire.IDKey, "s1"); err != nil || resp.GetSize() != 30 {
		t.Fatalf("first upload: %v, %v; want 30 bytes", resp, err)
	}
	steps := []struct {
		name     string
		chunks   int
		kv       []string
		wantCode codes.Code
		wantHow  string
		wantPid  int64
	}{
		{"a retry, its first message only", 1, []string{ledgerwire.IDKey, "s1", ledgerwire.RetryKey, "1.ledger", ledgerwire.SentKey, first}, codes.OK, ledgerwire.Replayed, 1},
		{"a retry without what was sent", 3, []string{ledgerwire.IDKey, "s1", ledgerwire.RetryKey, "1.ledger"}, codes.InvalidArgument, ledgerwire.Unreadable, 0},
		{"a retry never started, not all sent again", 1, []string{ledgerwire.IDKey, "s2", ledgerwire.RetryKey, "1.ledger", ledgerwire.SentKey, first}, codes.Unknown, ledgerwire.NotStarted, 0},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			resp, how, err := uploadCall(t, cc2, s.chunks, s.kv...)
			if got := status.Code(err); got != s.wantCode || how != s.wantHow || resp.GetPid() != s.wantPid {
				t.Errorf("got %v, %q, pid %d (%v); want %v, %q, pid %d", got, how, resp.GetPid(), err, s.wantCode, s.wantHow, s.wantPid)
			}
			if n := svc2.runs.Load(); n != 0 {
				t.Errorf("the successor ran %d uploads; want none", n)
			}
		})
	}

	size := recordedSize(t, path1)
	st, err := testpb.NewTestClient(cc1).Echo(metadata.AppendToOutgoingContext(callCtx(t, "", ""), ledgerwire.IDKey, "b1"))
	if err != nil {
		t.Fatal(err)
	}
	_ = st.CloseSend()
	if _, err := st.Recv(); status.Code(err) != codes.Unimplemented {
		t.Fatalf("Echo: %v; want Unimplemented, from the handler", err)
	}
	if got := recordedSize(t, path1); got != size {
		t.Errorf("a bidirectional stream grew the ledger from %d to %d bytes; want it not recorded", size, got)
	}
}
