//go:build unix

package goplugin_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/go-plugin"

	"github.com/grpc-respawn/respawn/internal/goplugintest"
	"github.com/grpc-respawn/respawn/internal/respawntest"
	"github.com/grpc-respawn/respawn/internal/testpb"
	"github.com/grpc-respawn/respawn/redial"
	"github.com/grpc-respawn/respawn/redial/goplugin"
)

// TestNoPolicyStubFollowsThePlugin: the go-plugin hook given to redial.New
// without any call policy — the construction that used to compile into the
// Velero bug (every call on the stub failed for good after the first death,
// "the client connection is closing") — still routes: the stub dispensed
// once is answered by each new plugin after three SIGKILLs.
func TestNoPolicyStubFollowsThePlugin(t *testing.T) {
	bin := goplugintest.BuildOnce(t)
	journal := filepath.Join(t.TempDir(), "journal")
	hook := &goplugin.Hook{Client: func() *plugin.ClientConfig { return goplugintest.Config(bin, journal) }}
	rc, err := redial.New(hook)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	ctx := respawntest.Context(t, 60*time.Second)
	if err := rc.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	raw, err := hook.Dispense(rc.Current(), goplugintest.Name)
	if err != nil {
		t.Fatal(err)
	}
	stub := raw.(testpb.TestClient)
	for kill := 1; kill <= 3; kill++ {
		respawntest.Kill(t, rc.Current()) // returns once the plugin is reaped
		resp, err := stub.Get(ctx, &testpb.GetRequest{})
		if err != nil {
			t.Fatalf("Get on the stub after kill %d: %v", kill, err)
		}
		if got, want := resp.GetPid(), int64(rc.Current().Process().PID); got != want {
			t.Errorf("after kill %d: answered by pid %d, want the current plugin %d", kill, got, want)
		}
	}
}
