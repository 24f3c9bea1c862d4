//go:build unix

package goplugin_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/go-plugin"

	"github.com/grpc-respawn/respawn"
	"github.com/grpc-respawn/respawn/goplugin"
	"github.com/grpc-respawn/respawn/internal/countertest"
	"github.com/grpc-respawn/respawn/internal/respawntest"
	"github.com/grpc-respawn/respawn/redial"
)

// TestDoBoundsTheWaitForAnExit: when f fails with ErrPluginGone while the
// instance's exit is not reported (here: it lives on; a plugin stuck in
// its death does the same), Do waits a bounded time for the report before
// each new try, not until ctx ends: it tries three times and returns f's
// error while ctx still runs.
func TestDoBoundsTheWaitForAnExit(t *testing.T) {
	bin := countertest.BuildOnce(t)
	ctx := respawntest.Context(t, 30*time.Second)
	rc, err := goplugin.Connect(ctx,
		goplugin.Config{Client: func() *plugin.ClientConfig { return countertest.Config(bin) }},
		respawn.WithCalls())
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	each := goplugin.DispenseEach[*countertest.Client](rc, countertest.Name)
	tries := 0
	err = each.Do(ctx, func(*countertest.Client) error {
		tries++
		return fmt.Errorf("the plugin said so: %w", redial.ErrPluginGone)
	})
	if ctx.Err() != nil {
		t.Fatalf("Do returned %v only once ctx ended, after %d tries", err, tries)
	}
	if tries != 3 {
		t.Errorf("Do tried %d times, want 3", tries)
	}
}
