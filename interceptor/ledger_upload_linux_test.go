package interceptor_test

import (
	"context"
	"testing"
	"time"

	"github.com/grpc-respawn/respawn/interceptor"
	"github.com/grpc-respawn/respawn/internal/respawntest"
	"github.com/grpc-respawn/respawn/internal/testpb"
)

// TestLedgerUploadAbandoned: an upload whose caller ends its ctx without
// reading its end holds its plugin's ledger no longer: once that plugin
// has died, its ledger file is removed, as after an upload that ended.
func TestLedgerUploadAbandoned(t *testing.T) {
	h := newHost(t, nil, nil, interceptor.WithLedger())
	first := h.rc.Current()
	path := ledgerPath(t, first)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	st, err := h.client.Upload(ctx)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if err := st.Send(&testpb.UploadRequest{Id: "u1", Key: "k", Data: make([]byte, 10)}); err != nil {
		cancel()
		t.Fatal(err)
	}
	cancel() // the caller abandons the upload
	respawntest.Kill(t, first)
	if _, err := h.client.Get(respawntest.Context(t, 20*time.Second), &testpb.GetRequest{Id: "g1"}); err != nil {
		t.Fatalf("Get on the successor: %v", err)
	}
	waitGone(t, path)
}
