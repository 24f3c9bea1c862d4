//go:build unix && !race

package ledger

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/grpc-respawn/respawn/internal/ledgerwire"
	"github.com/grpc-respawn/respawn/internal/testpb"
)

// TestInterceptAllocs guards the hot path: nothing added for a call that
// is not recorded, and at most two allocations for one that is. (The race
// detector randomises sync.Pool, hence !race.)
func TestInterceptAllocs(t *testing.T) {
	l, err := openMade(t, filepath.Join(privateTempDir(t), ledgerwire.FileName(1)), Config{}.normalise())
	if err != nil {
		t.Fatal(err)
	}
	defer l.close()
	resp := &testpb.AppendResponse{Pid: 1, Id: "x", Executions: 7}
	handler := func(context.Context, any) (any, error) { return resp, nil }
	withID := metadata.NewIncomingContext(context.Background(), metadata.Pairs(ledgerwire.IDKey, "0123456789abcdef01234567", "user-agent", "grpc-go"))
	noID := metadata.NewIncomingContext(context.Background(), metadata.Pairs("user-agent", "grpc-go"))
	tests := []struct {
		name   string
		ctx    context.Context
		method string
		max    float64
	}{
		{"no id", noID, "/respawn.test.v1.Test/Append", 0},
		{"no metadata", context.Background(), "/respawn.test.v1.Test/Append", 0},
		{"health with an id", withID, "/grpc.health.v1.Health/Check", 0},
		{"go-plugin's own with an id", withID, "/plugin.GRPCController/Shutdown", 0},
		{"recorded", withID, "/respawn.test.v1.Test/Append", 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			info := &grpc.UnaryServerInfo{FullMethod: tt.method}
			got := testing.AllocsPerRun(1000, func() {
				if _, err := l.intercept(tt.ctx, nil, info, handler); err != nil {
					t.Fatal(err)
				}
			})
			t.Logf("%v allocations per call", got)
			if got > tt.max {
				t.Errorf("intercept allocates %v times per call, want at most %v", got, tt.max)
			}
		})
	}
}

// TestIndexLookupAllocs: a lookup in a file of many calls' records
// allocates as much as in a file of one: it keeps only where the records
// of the call it looks for are.
func TestIndexLookupAllocs(t *testing.T) {
	const m = "/s.S/M"
	allocs := func(calls int) float64 {
		dir := t.TempDir()
		var data []byte
		for i := range calls {
			id := fmt.Sprintf("%024d", i)
			data = appendStarted(data, id, m)
			data = appendRecord(data, completedOK(id, m))
		}
		if err := os.WriteFile(filepath.Join(dir, "1.ledger"), data, 0o600); err != nil {
			t.Fatal(err)
		}
		x := &index{dir: dir}
		defer x.close()
		k := key{fmt.Sprintf("%024d", calls/2), m}
		return testing.AllocsPerRun(10, func() {
			if f, err := x.lookup(k, []string{"1.ledger"}); err != nil || f.completed == nil {
				t.Fatalf("lookup: %+v, %v; want it completed", f, err)
			}
		})
	}
	one, many := allocs(1), allocs(10000)
	if many > one {
		t.Errorf("a lookup allocates %v times in a file of 10000 calls, %v in a file of one; want no more", many, one)
	}
}
