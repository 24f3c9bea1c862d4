package interceptor_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/grpc-respawn/respawn/interceptor"
	"github.com/grpc-respawn/respawn/internal/respawntest"
	"github.com/grpc-respawn/respawn/internal/testpb"
)

func TestLedgerSmoke(t *testing.T) {
	for _, point := range []string{"before-started", "after-started", "handler", "after-handler", "after-completed"} {
		t.Run(point, func(t *testing.T) {
			once := filepath.Join(t.TempDir(), "killed")
			h := newHost(t, []string{"-ledger-kill-at", point, "-ledger-kill-once", once}, nil, interceptor.WithLedger())
			ctx := respawntest.Context(t, 20*time.Second)
			resp, err := h.client.Append(ctx, &testpb.AppendRequest{Id: "a1"})
			t.Logf("%s: resp=%v err=%v executions=%d", point, resp, err, h.executions(t, "a1"))
		})
	}
}
