//go:build unix

package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/grpc-respawn/respawn/internal/plugintest"
	"github.com/grpc-respawn/respawn/internal/testpb"
)

// stormCallers is how many calls are in flight when the plugin dies.
const stormCallers = 64

// stormDelay is how long each Get sleeps in the plugin. Every call is in its
// handler when the plugin is killed, and a retried Get sleeps again on the
// new plugin, so ms-to-all-answered is at least this. It must outlast the
// time from the first of the calls reaching the plugin to the last (else
// the first are answered before the kill): 100ms did not at load 19 on 2
// cores.
const stormDelay = 500 * time.Millisecond

// BenchmarkStorm kills the plugin while 64 Gets are in its handlers, once per
// iteration, and reports how many respawns that caused (the target is
// exactly 1) and the time from the kill until all 64 callers had an answer.
func BenchmarkStorm(b *testing.B) {
	b.Run(fmt.Sprintf("callers=%d", stormCallers), func(b *testing.B) {
		journal := filepath.Join(b.TempDir(), "journal")
		rc := newRespawn(b, pluginCommand(b, journal))
		defer rc.Close()
		client := testpb.NewTestClient(rc)

		ds := make([]time.Duration, 0, b.N)
		var respawns uint64
		failed, early := 0, 0
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			prefix := fmt.Sprintf("storm%d-", i)
			type answer struct {
				pid int64
				err error
			}
			answers := make(chan answer, stormCallers)
			for j := range stormCallers {
				go func() {
					ctx, cancel := callCtx()
					defer cancel()
					resp, err := client.Get(ctx, &testpb.GetRequest{Id: fmt.Sprint(prefix, j), DelayMs: stormDelay.Milliseconds()})
					answers <- answer{resp.GetPid(), err}
				}()
			}
			waitInHandler(b, journal, prefix, stormCallers)

			before := rc.Stats().Respawns
			p := rc.Current().Process()
			began := time.Now()
			if !killProcess(p) {
				b.Fatal("plugin already gone before the kill")
			}
			for range stormCallers {
				switch a := <-answers; {
				case a.err != nil:
					failed++
				case a.pid == int64(p.PID):
					early++ // answered before the kill: not part of the storm
				}
			}
			ds = append(ds, time.Since(began))
			respawns += rc.Stats().Respawns - before
		}
		b.StopTimer()
		var sum time.Duration
		for _, d := range ds {
			sum += d
		}
		b.ReportMetric(float64(sum)/float64(len(ds))/float64(time.Millisecond), "ms-to-all-answered")
		b.ReportMetric(float64(respawns)/float64(b.N), "respawns/kill")
		b.ReportMetric(float64(failed), "failed-calls")
		if early > 0 {
			b.Errorf("%d calls were answered before the kill: raise stormDelay", early)
		}
	})
}

// waitInHandler waits up to 20s until the journal shows n calls whose id
// starts with prefix: they are all in the plugin's handler.
func waitInHandler(b *testing.B, journal, prefix string, n int) {
	const limit = 20 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	got := 0
	err := plugintest.WaitJournal(ctx, journal, func(j map[string]int) bool {
		got = 0
		for id := range j {
			if strings.HasPrefix(id, prefix) {
				got++
			}
		}
		return got >= n
	})
	if err != nil {
		b.Fatalf("only %d of %d calls reached the plugin within %v: %v", got, n, limit, err)
	}
}
