package goplugin_test

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-plugin"

	"github.com/grpc-respawn/respawn"
	"github.com/grpc-respawn/respawn/interceptor"
	"github.com/grpc-respawn/respawn/internal/goplugintest"
	"github.com/grpc-respawn/respawn/internal/plugintest"
	"github.com/grpc-respawn/respawn/internal/respawntest"
	"github.com/grpc-respawn/respawn/internal/testpb"
	"github.com/grpc-respawn/respawn/redial"
	"github.com/grpc-respawn/respawn/redial/goplugin"
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

	var (
		mu      sync.Mutex
		results = make(map[string]error)
		wg      sync.WaitGroup
	)
	stop := make(chan struct{})
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				id := fmt.Sprintf("w%d-%d", i, n)
				_, err := client.Append(ctx, &testpb.AppendRequest{Id: id, DelayMs: 20})
				mu.Lock()
				results[id] = err
				mu.Unlock()
			}
		}()
	}
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
	close(stop)
	wg.Wait()

	j, err := plugintest.ReadJournal(journal)
	if err != nil {
		t.Fatal(err)
	}
	var answered, interrupted int
	for id, err := range results {
		switch n := j[id]; {
		case err == nil:
			answered++
			if n != 1 {
				t.Errorf("Append %s answered and ran %d times; want 1", id, n)
			}
		case errors.Is(err, interceptor.ErrOutcomeUnknown) && strings.Contains(err.Error(), "interrupted in its handler"):
			interrupted++
			if n > 1 {
				t.Errorf("Append %s interrupted and ran %d times; want at most 1", id, n)
			}
		default:
			t.Errorf("Append %s: %v; want it answered, or ErrOutcomeUnknown, interrupted in its handler", id, err)
		}
	}
	for id, n := range j {
		if _, called := results[id]; !called || n > 1 {
			t.Errorf("journal: %s ran %d times; called: %v", id, n, called)
		}
	}
	t.Logf("%d kills, %d Appends: %d answered, %d interrupted in their handler", kills, len(results), answered, interrupted)
}

func executions(j map[string]int) int {
	n := 0
	for _, c := range j {
		n += c
	}
	return n
}
