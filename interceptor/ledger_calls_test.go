package interceptor_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/metadata"

	"github.com/grpc-respawn/respawn/interceptor"
	"github.com/grpc-respawn/respawn/internal/appendtest"
	"github.com/grpc-respawn/respawn/internal/ledgerwire"
	"github.com/grpc-respawn/respawn/internal/plugintest"
	"github.com/grpc-respawn/respawn/internal/respawntest"
	"github.com/grpc-respawn/respawn/internal/testpb"
)

// TestLedgerConcurrentKills has callers make Appends with distinct ids
// while plugin after plugin is SIGKILLed under them: each Append ran
// exactly once, or failed as interrupted in its handler having run at
// most once.
func TestLedgerConcurrentKills(t *testing.T) {
	const (
		callers = 8
		kills   = 4
	)
	h := newHost(t, nil, nil, interceptor.WithLedger())
	ctx := respawntest.Context(t, 60*time.Second)

	stop := appendtest.Writers(ctx, callers, "c", func(ctx context.Context, id string) error {
		_, err := h.client.Append(ctx, &testpb.AppendRequest{Id: id, DelayMs: 20})
		return err
	})
	var last uint64
	for range kills {
		g := h.events.WaitCurrent(t, h.rc, last+1)
		last = g.Number()
		// Calls have completed on g, and others are in flight at its death.
		j, err := h.journalCounts(t)
		if err != nil {
			t.Fatal(err)
		}
		h.waitTotal(t, total(j)+3*callers)
		respawntest.Kill(t, g)
	}
	results := stop()
	j, err := h.journalCounts(t)
	if err != nil {
		t.Fatal(err)
	}
	ok, interrupted := appendtest.CheckExactlyOnce(t, j, results)
	t.Logf("%d kills, %d Appends: %d answered, %d interrupted in their handler", kills, len(results), ok, interrupted)
}

// waitTotal waits until the journal holds at least n executions.
func (h *host) waitTotal(t *testing.T, n int) {
	t.Helper()
	err := plugintest.WaitJournal(respawntest.Context(t, 10*time.Second), h.journal, func(j map[string]int) bool { return total(j) >= n })
	if err != nil {
		t.Fatalf("journal never showed %d executions: %v", n, err)
	}
}

func total(j map[string]int) int {
	n := 0
	for _, c := range j {
		n += c
	}
	return n
}

// TestLedgerSameCallID sends two Appends at once whose ctx carry the same
// call id and the same ledger id (a caller's bug, or a plugin that
// forwards its incoming metadata): the host gives each call a ledger id of
// its own, so each runs once and neither is answered from the other's
// record or refused. (A plugin that is sent one ledger id twice at once
// refuses the second, Aborted: see package ledger's tests.)
func TestLedgerSameCallID(t *testing.T) {
	h := newHost(t, nil, nil, interceptor.WithLedger())
	ctx := metadata.AppendToOutgoingContext(respawntest.Context(t, 20*time.Second),
		interceptor.CallIDKey, "the-same-id", ledgerwire.IDKey, "the-same-ledger-id", ledgerwire.RetryKey, "1.ledger")
	first := make(chan error, 1)
	go func() {
		_, err := h.client.Append(ctx, &testpb.AppendRequest{Id: "s1", DelayMs: 1000})
		first <- err
	}()
	h.waitJournal(t, "s1", 1)
	if _, err := h.client.Append(ctx, &testpb.AppendRequest{Id: "s2"}); err != nil {
		t.Errorf("second Append: %v; want it run", err)
	}
	if err := <-first; err != nil {
		t.Errorf("first Append: %v; want it answered", err)
	}
	j, err := h.journalCounts(t)
	if err != nil {
		t.Fatal(err)
	}
	if j["s1"] != 1 || j["s2"] != 1 {
		t.Errorf("journal: s1 ran %d times, s2 %d; want 1 and 1", j["s1"], j["s2"])
	}
}

// TestLedgerForwardedKeysDropped: ledger keys that a call's ctx carries (a
// plugin that forwards its incoming metadata) are dropped from calls the
// host does not keep in ledgers, an idempotent Put here, so that the plugin
// answers none of them from another call's record, nor refuses them.
func TestLedgerForwardedKeysDropped(t *testing.T) {
	h := newHost(t, nil, nil, interceptor.WithLedger())
	for _, retryOf := range []string{"1.ledger", "7.ledger"} {
		ctx := metadata.AppendToOutgoingContext(respawntest.Context(t, 20*time.Second),
			ledgerwire.IDKey, "forwarded-id", ledgerwire.RetryKey, retryOf)
		for _, v := range []string{"v1", "v2"} {
			if _, err := h.client.Put(ctx, &testpb.PutRequest{Id: "p-" + v, Key: "k", Value: v}); err != nil {
				t.Fatalf("Put %s (forwarded retry of %s): %v", v, retryOf, err)
			}
		}
		g, err := h.client.Get(respawntest.Context(t, 5*time.Second), &testpb.GetRequest{Id: "g", Key: "k"})
		if err != nil || g.GetValue() != "v2" {
			t.Errorf("Get k = %q, %v after two Puts forwarding a retry of %s; want v2", g.GetValue(), err, retryOf)
		}
	}
}
