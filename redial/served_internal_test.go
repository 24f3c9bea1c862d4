package redial

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/grpc-respawn/respawn/internal/testpb"
	"github.com/grpc-respawn/respawn/internal/testplugin"
)

type hookFunc func(context.Context, Request) (Backend, error)

func (f hookFunc) Respawn(ctx context.Context, req Request) (Backend, error) { return f(ctx, req) }

// TestRecoveryLastsUntilServed: a respawn counts as in progress, for the
// spare launches and clean-ups of every Conn that wait behind the
// recoveries, until its plugin has served a call, not only until it is
// swapped in.
func TestRecoveryLastsUntilServed(t *testing.T) {
	// Longer than any pause of a loaded machine between Connect and the
	// check below: only the served call may end the respawn.
	defer func(d time.Duration) { servedWait = d }(servedWait)
	servedWait = time.Hour
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	sock := filepath.Join(t.TempDir(), "p.sock")
	srv, err := testplugin.ServeUnix(sock, "")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()

	c, err := New(hookFunc(func(context.Context, Request) (Backend, error) {
		return Backend{Target: "unix://" + sock}, nil
	}), WithDialOptions(grpc.WithTransportCredentials(insecure.NewCredentials())))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	g := c.Current()
	inProcess.mu.Lock()
	active := inProcess.active
	inProcess.mu.Unlock()
	if active == 0 || !g.recovering.Load() {
		t.Fatalf("the respawn counts as over (%d in progress) before its plugin served a call", active)
	}
	if _, err := testpb.NewTestClient(c).Get(ctx, &testpb.GetRequest{Key: "k"}); err != nil {
		t.Fatal(err)
	}
	if g.recovering.Load() {
		t.Fatal("the respawn still counts as in progress after its plugin served a call")
	}
}
