//go:build unix

package ledger

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/grpc-respawn/respawn/internal/ledgerwire"
	"github.com/grpc-respawn/respawn/internal/testpb"
)

// BenchmarkIntercept measures the ledger's interceptor on its own, with a
// handler that answers at once: what it adds to a call, without the
// transport's variance around it (see bench.BenchmarkLedger for calls over
// a socket).
func BenchmarkIntercept(b *testing.B) {
	const id = "0123456789abcdef01234567"
	withID := metadata.NewIncomingContext(context.Background(), metadata.Pairs(ledgerwire.IDKey, id, "user-agent", "grpc-go"))
	noID := metadata.NewIncomingContext(context.Background(), metadata.Pairs("user-agent", "grpc-go"))
	resp := &testpb.AppendResponse{Pid: 1, Id: id, Executions: 7}
	handler := func(context.Context, any) (any, error) { return resp, nil }
	cases := []struct {
		name, method string
		ctx          context.Context
		sync         bool
	}{
		{"call=recorded", "/respawn.test.v1.Test/Append", withID, false},
		{"call=recorded-sync", "/respawn.test.v1.Test/Append", withID, true},
		{"call=no-id", "/respawn.test.v1.Test/Append", noID, false},
		{"call=health", "/grpc.health.v1.Health/Check", withID, false},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			dir := b.TempDir()
			l, err := openMade(b, filepath.Join(privateSubdir(b, dir), ledgerwire.FileName(1)), Config{Sync: c.sync}.normalise())
			if err != nil {
				b.Fatal(err)
			}
			defer l.close()
			info := &grpc.UnaryServerInfo{FullMethod: c.method}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := l.intercept(c.ctx, nil, info, handler); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkLedgerLookup measures a retry's first lookup in a dead plugin's
// ledger file of size bytes, which the page cache holds: the time to find
// the call's completed record and read it again, the bytes allocated on
// the way per byte of the file (alloc-B/file-B), and the heap still held
// per byte of the file while another retry's lookup keeps the file open
// (held-B/file-B), after a garbage collection.
func BenchmarkLedgerLookup(b *testing.B) {
	const m = "/respawn.test.v1.Test/Append"
	for _, size := range []int{16 << 20, 64 << 20} {
		dir := b.TempDir()
		var data []byte
		var ids []string
		for i := 0; len(data) < size; i++ {
			id := fmt.Sprintf("%024d", i)
			ids = append(ids, id)
			data = appendStarted(data, id, m)
			r := completedOK(id, m)
			r.resp = make([]byte, 100)
			data = appendRecord(data, r)
		}
		if err := os.WriteFile(filepath.Join(dir, "1.ledger"), data, 0o600); err != nil {
			b.Fatal(err)
		}
		k := key{ids[len(ids)/2], m}
		b.Run(fmt.Sprintf("size=%dMiB", size>>20), func(b *testing.B) {
			var before, after runtime.MemStats
			var held uint64
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				runtime.GC()
				runtime.ReadMemStats(&before)
				b.StartTimer()
				x := &index{dir: dir}
				x.lookups.Add(1) // another retry's lookup, under way
				if f, err := x.lookup(k, []string{"1.ledger"}); err != nil || f.completed == nil {
					b.Fatalf("lookup: %+v, %v; want it completed", f, err)
				}
				b.StopTimer()
				runtime.GC()
				runtime.ReadMemStats(&after)
				held = max(held, after.HeapAlloc-min(after.HeapAlloc, before.HeapAlloc))
				x.mu.Lock()
				x.done()
				x.mu.Unlock()
				b.StartTimer()
			}
			b.ReportMetric(float64(held)/float64(len(data)), "held-B/file-B")
			b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/float64(len(data)), "alloc-B/file-B")
		})
	}
}
