package goplugin_test

import (
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/grpc-respawn/respawn/interceptor"
	"github.com/grpc-respawn/respawn/internal/goplugintest"
	"github.com/grpc-respawn/respawn/internal/plugintest"
	"github.com/grpc-respawn/respawn/internal/respawntest"
	"github.com/grpc-respawn/respawn/internal/testpb"
	"github.com/grpc-respawn/respawn/redial"
	"github.com/grpc-respawn/respawn/redial/goplugin"
)

// TestServiceConfigRetryPolicy: a host whose go-plugin config sets a
// retryPolicy in its default service config, as hosts do, still has a
// killed plugin replaced; its reads survive the kill and a killed write
// runs once. respawn turns grpc-go's own retries off on the connections it
// is given (see interceptor.Policy.Start).
func TestServiceConfigRetryPolicy(t *testing.T) {
	const retryPolicy = `{"methodConfig": [{"name": [{"service": "respawn.test.v1.Test"}],
		"retryPolicy": {"maxAttempts": 3, "initialBackoff": "0.01s", "maxBackoff": "0.1s",
			"backoffMultiplier": 2, "retryableStatusCodes": ["UNAVAILABLE"]}}]}`
	bin := goplugintest.BuildOnce(t)
	journal := filepath.Join(t.TempDir(), "journal")
	hook := &goplugin.Hook{Client: func() *plugin.ClientConfig {
		cfg := goplugintest.Config(bin, journal)
		cfg.GRPCDialOptions = append(cfg.GRPCDialOptions, grpc.WithDefaultServiceConfig(retryPolicy))
		return cfg
	}}
	rc, err := redial.New(hook, redial.WithPolicy(interceptor.New()))
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if err := rc.Connect(respawntest.Context(t, 30*time.Second)); err != nil {
		t.Fatal(err)
	}
	raw, err := hook.Dispense(rc.Current(), goplugintest.Name)
	if err != nil {
		t.Fatal(err)
	}
	client := raw.(testpb.TestClient)

	errc := make(chan error, 1)
	go func() {
		_, err := client.Append(respawntest.Context(t, 30*time.Second), &testpb.AppendRequest{Id: "w", DelayMs: 5000})
		errc <- err
	}()
	if err := plugintest.WaitJournal(respawntest.Context(t, 10*time.Second), journal, func(j map[string]int) bool { return j["w"] > 0 }); err != nil {
		t.Fatal(err)
	}
	respawntest.Kill(t, rc.Current())
	if err := <-errc; !errors.Is(err, interceptor.ErrOutcomeUnknown) {
		t.Errorf("the killed write: %v, want ErrOutcomeUnknown", err)
	}
	for i := range 5 {
		ctx := respawntest.Context(t, 30*time.Second)
		if _, err := client.Get(ctx, &testpb.GetRequest{}); err != nil {
			t.Fatalf("read %d after the kill: %v", i, err)
		}
		if _, err := client.Append(ctx, &testpb.AppendRequest{Id: fmt.Sprint("later-", i)}); err != nil {
			t.Fatalf("write %d after the kill: %v", i, err)
		}
	}
	j, err := plugintest.ReadJournal(journal)
	if err != nil {
		t.Fatal(err)
	}
	for id, n := range j {
		if n != 1 {
			t.Errorf("%s ran %d times, want 1", id, n)
		}
	}
	_ = rc.Close()
	if got := rc.Stats().Respawns; got != 1 {
		t.Errorf("respawns = %d, want 1", got)
	}
}
