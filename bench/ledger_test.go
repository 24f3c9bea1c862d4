//go:build unix

package bench

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/grpc-respawn/respawn/internal/ledgerwire"
	"github.com/grpc-respawn/respawn/internal/testpb"
	"github.com/grpc-respawn/respawn/internal/testplugin"
	"github.com/grpc-respawn/respawn/ledger"
)

// BenchmarkLedger measures what the plugin's ledger adds to a unary call:
// the same calls to in-process servers over unix sockets, side by side:
// plain; with a unary interceptor that does nothing (grpc-go's own cost of
// any interceptor: its generated handler allocates the call's info and
// handler closure); and with ledger.ServerOptions. Only call=recorded, an
// Append with a ledger id, is recorded (two write(2)s to the ledger file);
// call=no-id (an Append the host sent without an id: it keeps no ledger)
// and call=idempotent (a Get, which the host sends without an id: it may
// run twice) go straight to the handler. cpu-µs/op is the CPU time, user
// and system, of the whole process (client and server) per call, as
// getrusage(2) counts it: the ledger's cost is its difference to plain's.
func BenchmarkLedger(b *testing.B) {
	servers := []struct {
		name string
		opts func(b *testing.B) []grpc.ServerOption
	}{
		{"plain", func(*testing.B) []grpc.ServerOption { return nil }},
		{"interceptor", func(*testing.B) []grpc.ServerOption {
			return []grpc.ServerOption{grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
				return h(ctx, req)
			})}
		}},
		{"ledger", func(b *testing.B) []grpc.ServerOption {
			dir, err := os.MkdirTemp("", "ledger-bench") // 0700, as the host makes it
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = os.RemoveAll(dir) })
			path := filepath.Join(dir, ledgerwire.FileName(1)) // made empty, as the host makes it
			if err := os.WriteFile(path, nil, 0o600); err != nil {
				b.Fatal(err)
			}
			b.Setenv(ledgerwire.Env, path)
			b.Setenv(ledgerwire.KeyEnv, "benchkey")
			opts := ledger.ServerOptions(ledger.Config{})
			if len(opts) == 0 {
				b.Fatal("ledger.ServerOptions: ledger off")
			}
			return opts
		}},
	}
	const id = "0123456789abcdef01234567" // as long as respawn's call ids
	calls := []struct {
		name string
		md   metadata.MD
		call func(ctx context.Context, c testpb.TestClient) error
	}{
		{"recorded", metadata.Pairs(ledgerwire.IDKey, id), appendOnce},
		{"no-id", nil, appendOnce},
		{"idempotent", nil, func(ctx context.Context, c testpb.TestClient) error {
			_, err := c.Get(ctx, &testpb.GetRequest{Key: "k"})
			return err
		}},
	}
	clients := make(map[string]testpb.TestClient, len(servers))
	for _, srv := range servers {
		clients[srv.name] = serveUnix(b, srv.opts(b)...)
	}
	for _, c := range calls {
		b.Run("call="+c.name, func(b *testing.B) {
			for _, srv := range servers {
				b.Run("server="+srv.name, func(b *testing.B) {
					ctx, cancel := benchCtx()
					defer cancel()
					if c.md != nil {
						ctx = metadata.NewOutgoingContext(ctx, c.md)
					}
					client := clients[srv.name]
					if err := c.call(ctx, client); err != nil { // connect outside the timer
						b.Fatal(err)
					}
					b.ReportAllocs()
					cpu := processCPU(b)
					for b.Loop() {
						if err := c.call(ctx, client); err != nil {
							b.Fatal(err)
						}
					}
					b.ReportMetric(float64((processCPU(b)-cpu).Microseconds())/float64(b.N), "cpu-µs/op")
				})
			}
		})
	}
}

// processCPU is the CPU time, user and system, this process has used: the
// client's and the in-process server's, which the same calls to a plain
// server tell apart.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func appendOnce(ctx context.Context, c testpb.TestClient) error {
	_, err := c.Append(ctx, &testpb.AppendRequest{})
	return err
}

// serveUnix serves the test service in-process on a unix socket with opts,
// and returns a client of it; both end with the benchmark.
func serveUnix(b *testing.B, opts ...grpc.ServerOption) testpb.TestClient {
	b.Helper()
	dir, err := os.MkdirTemp("", "bench-sock")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = os.RemoveAll(dir) })
	lis, err := net.Listen("unix", filepath.Join(dir, "s.sock"))
	if err != nil {
		b.Fatal(err)
	}
	s := grpc.NewServer(opts...)
	testplugin.Register(s, testplugin.New(""))
	go func() { _ = s.Serve(lis) }()
	b.Cleanup(s.Stop)
	cc, err := grpc.NewClient("unix://"+lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cc.Close() })
	return testpb.NewTestClient(cc)
}
