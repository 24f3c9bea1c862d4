//go:build unix

package bench

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/grpc-respawn/respawn/interceptor"
	"github.com/grpc-respawn/respawn/internal/ledgerwire"
	"github.com/grpc-respawn/respawn/internal/testpb"
	"github.com/grpc-respawn/respawn/internal/testplugin"
	"github.com/grpc-respawn/respawn/redial"
)

// BenchmarkLedger measures what exactly-once costs a unary call end to
// end, on each side: the host (this process) calls Append, a call that is
// not idempotent, on the test plugin, a process of its own, over a unix
// socket. Hosts: plain (grpc.NewClient); plain-id (the same, each call
// with a fresh ledger id added by the caller, as respawn-ledger's: what
// carrying the id costs both sides, whoever adds it); respawn (redial.Conn with
// interceptor.New()); respawn-ledger (with interceptor.WithLedger(): each
// Append carries a fresh ledger id and holds the plugin's ledger).
// Plugins: plain (no interceptor); interceptor (a unary interceptor that
// only calls the handler: grpc-go's generated handler allocates the call's
// info and handler closure once any interceptor is installed); ledger
// (ledger.ServerOptions, given a ledger by the host: a started and a
// completed record, stored into the file's mapping on Linux, one write(2)
// each elsewhere). Each pair runs its own plugin for
// the whole benchmark.
//
// The CPU time of one call over a socket between two processes swings by
// a third from run to run on a shared machine, far more than the ledger
// costs, so each pair is measured against the reference pair (host=plain,
// server=plain, a plugin of its own) in the same loop: ledgerBlock calls
// to one, then as many to the other, and so on, so that both see the same
// load. Run it on one CPU, with one P in each process (GOMAXPROCS=1
// taskset -c 1; the plugins inherit both): on two CPUs, where each process
// wakes and how long its idle threads spin waiting for the other still
// move a side's CPU time per call by 5 to 10 µs between pairs.
//
// Per call to the pair: host-cpu-µs/op is this process's CPU time, user
// and system (getrusage(2)), host-allocs/op its heap allocations,
// plugin-cpu-µs/op and plugin-allocs/op the plugin process's, which it
// reports between blocks (testplugin.ReadUsage), call-µs/op the wall time;
// added-* is the same less the reference's. Row host=plain/server=plain
// measures the reference against itself: its added-* is the measurement's
// floor, zero give or take its noise. ns/op is one call to each and their
// share of the usage reads. A side's CPU time also depends on the other's
// pace: with both on one CPU, the host's grows with the time the plugin
// takes (compare host-cpu under server=plain, interceptor and ledger with
// the same host).
func BenchmarkLedger(b *testing.B) {
	pairs := []struct{ host, server string }{
		{"plain", "plain"},
		{"plain", "interceptor"},
		{"plain-id", "plain"},
		{"respawn", "plain"},
		{"respawn-ledger", "plain"},
		{"respawn-ledger", "interceptor"},
		{"respawn-ledger", "ledger"},
	}
	ref := dialLedgerPair(b, "plain", "plain")
	conns := make([]ledgerPair, len(pairs))
	for i, p := range pairs {
		conns[i] = dialLedgerPair(b, p.host, p.server)
	}
	for i, p := range pairs {
		b.Run("host="+p.host+"/server="+p.server, func(b *testing.B) {
			ctx, cancel := benchCtx()
			defer cancel()
			var pair, base tally
			for done := 0; done < b.N; done += ledgerBlock {
				n := min(ledgerBlock, b.N-done)
				pair.add(b, ctx, conns[i], n)
				base.add(b, ctx, ref, n)
			}
			pair.report(b, "", tally{})
			pair.report(b, "added-", base)
		})
	}
}

// ledgerBlock is how many calls BenchmarkLedger makes to one pair before
// it turns to the other: enough that the usage reads between blocks cost
// little per call, few enough that both pairs see the same load.
const ledgerBlock = 250

// tally sums what blocks of calls to one pair cost.
type tally struct {
	calls                    int
	wall, host, plugin       time.Duration
	hostAllocs, pluginAllocs uint64
}

// add makes n calls to the pair p, connected first, and adds what they
// cost to t. The usage reads are outside the measured span but for the
// plugin's encoding of the first read's answer and decoding of the
// second's request.
func (t *tally) add(b *testing.B, ctx context.Context, p ledgerPair, n int) {
	b.Helper()
	client := testpb.NewTestClient(p.cc)
	if t.calls == 0 {
		if err := appendOnce(ctx, client); err != nil { // connect outside the tally
			b.Fatal(err)
		}
	}
	plugin := readUsage(b, ctx, p.cc)
	mallocs := heapAllocs()
	start, cpu := time.Now(), processCPU(b)
	for range n {
		cctx := ctx
		if p.withID {
			cctx = metadata.AppendToOutgoingContext(ctx, ledgerwire.IDKey, fmt.Sprintf("%024x", p.ids.Add(1)))
		}
		if err := appendOnce(cctx, client); err != nil {
			b.Fatal(err)
		}
	}
	t.host += processCPU(b) - cpu
	t.wall += time.Since(start)
	t.hostAllocs += heapAllocs() - mallocs
	after := readUsage(b, ctx, p.cc)
	t.plugin += after.CPU - plugin.CPU
	t.pluginAllocs += after.Mallocs - plugin.Mallocs
	t.calls += n
}

// report reports t per call, less base per call (none if base is empty),
// as metrics named with prefix.
func (t tally) report(b *testing.B, prefix string, base tally) {
	base.calls = max(base.calls, 1)
	per := func(d time.Duration, calls int) float64 { return float64(d.Nanoseconds()) / 1e3 / float64(calls) }
	count := func(c uint64, calls int) float64 { return float64(c) / float64(calls) }
	b.ReportMetric(per(t.wall, t.calls)-per(base.wall, base.calls), prefix+"call-µs/op")
	b.ReportMetric(per(t.host, t.calls)-per(base.host, base.calls), prefix+"host-cpu-µs/op")
	b.ReportMetric(per(t.plugin, t.calls)-per(base.plugin, base.calls), prefix+"plugin-cpu-µs/op")
	b.ReportMetric(count(t.hostAllocs, t.calls)-count(base.hostAllocs, base.calls), prefix+"host-allocs/op")
	b.ReportMetric(count(t.pluginAllocs, t.calls)-count(base.pluginAllocs, base.calls), prefix+"plugin-allocs/op")
}

// heapAllocs is how many heap objects this process has allocated, as
// testing's allocs/op counts them.
func heapAllocs() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.Mallocs
}

// ledgerPair is a connection to one pair's plugin.
type ledgerPair struct {
	cc     grpc.ClientConnInterface
	withID bool           // each call carries a fresh ledger id of the caller's
	ids    *atomic.Uint64 // with withID
}

// dialLedgerPair launches the test plugin as server and returns a
// connection to it made as host; both end with the benchmark.
func dialLedgerPair(b *testing.B, host, server string) ledgerPair {
	b.Helper()
	var args []string
	if server == "interceptor" {
		args = append(args, "-unary-interceptor")
	}
	if host == "respawn-ledger" && server != "ledger" {
		args = append(args, "-no-ledger") // the host gives one; the plugin keeps none
	}
	if host == "plain" || host == "plain-id" {
		cc, err := grpc.NewClient(launchPlugin(b, args...), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = cc.Close() })
		return ledgerPair{cc: cc, withID: host == "plain-id", ids: new(atomic.Uint64)}
	}
	hook := pluginCommand(b, "")
	hook.Args = append(hook.Args, args...)
	var opts []interceptor.Option
	if host == "respawn-ledger" {
		opts = append(opts, interceptor.WithLedger())
	}
	rc := started(b, func() (*redial.Conn, error) {
		return redial.New(hook, redial.WithPolicy(interceptor.New(opts...)))
	})
	b.Cleanup(func() { _ = rc.Close() })
	if kept := rc.Current().Ledger().Kept() != ""; kept != (server == "ledger") {
		b.Fatalf("host=%s server=%s: the plugin keeps a ledger: %v", host, server, kept)
	}
	return ledgerPair{cc: rc}
}

// readUsage returns the Usage of the plugin behind cc.
func readUsage(b *testing.B, ctx context.Context, cc grpc.ClientConnInterface) testplugin.Usage {
	b.Helper()
	u, err := testplugin.ReadUsage(ctx, cc)
	if err != nil {
		b.Fatal(err)
	}
	return u
}

// processCPU is the CPU time, user and system, this process has used.
func processCPU(b *testing.B) time.Duration {
	cpu, err := testplugin.ProcessCPU()
	if err != nil {
		b.Fatal(err)
	}
	return cpu
}

func appendOnce(ctx context.Context, c testpb.TestClient) error {
	_, err := c.Append(ctx, &testpb.AppendRequest{})
	return err
}
