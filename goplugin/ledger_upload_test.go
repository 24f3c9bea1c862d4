package goplugin_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/go-plugin"

	"github.com/grpc-respawn/respawn"
	"github.com/grpc-respawn/respawn/goplugin"
	"github.com/grpc-respawn/respawn/interceptor"
	"github.com/grpc-respawn/respawn/internal/goplugintest"
	"github.com/grpc-respawn/respawn/internal/plugintest"
	"github.com/grpc-respawn/respawn/internal/respawntest"
	"github.com/grpc-respawn/respawn/internal/testpb"
)

// TestLedgerUpload: a go-plugin plugin with the ledger in its GRPCServer
// func dies once an upload's completion is in its ledger, before its
// answer is sent; the upload, through Connect with WithLedger, is answered
// from the dead plugin's record, and its object was stored once, with the
// bytes sent.
func TestLedgerUpload(t *testing.T) {
	bin := goplugintest.BuildOnce(t)
	journal := filepath.Join(t.TempDir(), "journal")
	once := filepath.Join(t.TempDir(), "killed")
	ctx := respawntest.Context(t, 30*time.Second)
	c, err := goplugin.Connect(ctx, goplugin.Config{Client: func() *plugin.ClientConfig {
		cfg := goplugintest.Config(bin, journal)
		cfg.Cmd.Env = append(cfg.Cmd.Env, goplugintest.KillAfterCompletedEnv+"="+once)
		return cfg
	}}, respawn.WithCalls(interceptor.WithLedger()))
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	raw, err := c.Dispense(ctx, goplugintest.Name)
	if err != nil {
		t.Fatalf("Dispense: %v", err)
	}
	client := raw.(testpb.TestClient)
	first := c.Current()

	st, err := client.Upload(ctx)
	if err != nil {
		t.Fatalf("Upload: %v", err)
	}
	buf := make([]byte, 16<<10) // one buffer for every chunk
	sum := sha256.New()
	for i := range 4 {
		copy(buf, bytes.Repeat([]byte{byte('a' + i)}, len(buf)))
		sum.Write(buf)
		req := &testpb.UploadRequest{Id: "u1", Data: buf}
		if i == 0 {
			req.Key = "backups/b1"
		}
		if err := st.Send(req); err != nil {
			t.Fatalf("Send %d: %v", i, err)
		}
	}
	resp, err := st.CloseAndRecv()
	if err != nil {
		t.Fatalf("CloseAndRecv: %v; want the answer from the dead plugin's record", err)
	}
	if g := c.Current(); g.Number() == first.Number() {
		t.Fatalf("plugin %d still current: it was not killed", g.Number())
	}
	if want := int64(first.Process().PID); resp.GetPid() != want {
		t.Errorf("answered by pid %d; want the dead plugin's, %d", resp.GetPid(), want)
	}
	if want := hex.EncodeToString(sum.Sum(nil)); resp.GetSha256() != want {
		t.Errorf("stored sha256 %s; want %s, the bytes sent", resp.GetSha256(), want)
	}
	j, err := plugintest.ReadJournal(journal)
	if err != nil {
		t.Fatal(err)
	}
	if j["u1"] != 1 {
		t.Errorf("journal: u1 stored %d times; want 1", j["u1"])
	}
}
