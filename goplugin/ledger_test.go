package goplugin_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/go-plugin"

	"github.com/grpc-respawn/respawn"
	"github.com/grpc-respawn/respawn/goplugin"
	"github.com/grpc-respawn/respawn/interceptor"
	"github.com/grpc-respawn/respawn/internal/appendtest"
	"github.com/grpc-respawn/respawn/internal/goplugintest"
	"github.com/grpc-respawn/respawn/internal/plugintest"
	"github.com/grpc-respawn/respawn/internal/respawntest"
	"github.com/grpc-respawn/respawn/internal/testpb"
	"github.com/grpc-respawn/respawn/redial"
)

// TestLedgerKills SIGKILLs go-plugin plugins that keep a ledger in their
// GRPCServer func while writers Append through Connect with WithLedger:
// no Append runs twice, none answered is missing from the journal, and
// the only failures are Appends interrupted in their handler.
func TestLedgerKills(t *testing.T) {
	const (
		writers = 4
		kills   = 3
	)
	bin := goplugintest.BuildOnce(t)
	journal := filepath.Join(t.TempDir(), "journal")
	events := &respawntest.Events{}
	ctx := respawntest.Context(t, 60*time.Second)
	c, err := goplugin.Connect(ctx, goplugin.Config{Client: func() *plugin.ClientConfig { return goplugintest.Config(bin, journal) }},
		respawn.WithCalls(interceptor.WithLedger()), respawn.WithConn(redial.WithEventHandler(events.Add)))
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	raw, err := c.Dispense(ctx, goplugintest.Name)
	if err != nil {
		t.Fatalf("Dispense: %v", err)
	}
	client := raw.(testpb.TestClient)

	stop := appendtest.Writers(ctx, writers, "w", func(ctx context.Context, id string) error {
		_, err := client.Append(ctx, &testpb.AppendRequest{Id: id, DelayMs: 20})
		return err
	})
	var last uint64
	for range kills {
		g := events.WaitCurrent(t, c.Conn, last+1)
		last = g.Number()
		// Appends have completed on g, and others are in flight at its death.
		j, err := plugintest.ReadJournal(journal)
		if err != nil {
			t.Fatal(err)
		}
		want := executions(j) + 3*writers
		if err := plugintest.WaitJournal(respawntest.Context(t, 20*time.Second), journal, func(j map[string]int) bool { return executions(j) >= want }); err != nil {
			t.Fatalf("plugin %d: %v", g.Number(), err)
		}
		respawntest.Kill(t, g)
	}
	results := stop()
	j, err := plugintest.ReadJournal(journal)
	if err != nil {
		t.Fatal(err)
	}
	answered, interrupted := appendtest.CheckExactlyOnce(t, j, results)
	t.Logf("%d kills, %d Appends: %d answered, %d interrupted in their handler", kills, len(results), answered, interrupted)
}

func executions(j map[string]int) int {
	n := 0
	for _, c := range j {
		n += c
	}
	return n
}
