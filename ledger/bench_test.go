//go:build unix

package ledger

import (
	"context"
	"path/filepath"
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
