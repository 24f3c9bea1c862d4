//go:build unix

package bench

import (
	"context"
	"errors"
	"testing"

	"google.golang.org/grpc"

	"github.com/grpc-respawn/respawn/interceptor"
	"github.com/grpc-respawn/respawn/internal/respawntest"
	"github.com/grpc-respawn/respawn/internal/testpb"
	"github.com/grpc-respawn/respawn/redial"
)

// BenchmarkInterceptor measures what respawn adds to a successful unary call
// on its own: the interceptor with an invoker that succeeds at once, against
// calling that invoker directly. A call over a socket varies by far more
// from run to run than this costs, so this is where the overhead can be seen.
// Divide it by BenchmarkUnary's time/op for the overhead ratio.
func BenchmarkInterceptor(b *testing.B) {
	target, dialer := serveBufconn(b)
	hook := respawntest.RespawnerFunc(func(context.Context, redial.Request) (redial.Backend, error) {
		return redial.Backend{Target: target}, nil
	})
	var h redial.Handle
	rc, err := redial.New(hook, redial.WithDialOptions(dialer), respawntest.WithHandle(nil, &h))
	if err != nil {
		b.Fatal(err)
	}
	defer rc.Close()
	ctx, cancel := benchCtx()
	defer cancel()
	if err := rc.Connect(ctx); err != nil {
		b.Fatal(err)
	}
	cc := rc.Current().ClientConn()
	req, reply := &testpb.GetRequest{}, &testpb.GetResponse{}
	const method = "/respawn.test.v1.Test/Get"
	invoker := asInvoker(func(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error { return nil })
	opts := []grpc.CallOption{grpc.StaticMethod()}

	b.Run("stack=plain", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = invoker(ctx, method, req, reply, cc, opts...)
		}
	})
	b.Run("stack=respawn", func(b *testing.B) {
		unary := asChained(interceptor.New().UnaryClientInterceptor(h))
		mustSucceed(b, unary(ctx, method, req, reply, cc, invoker, opts...))
		b.ReportAllocs()
		for b.Loop() {
			_ = unary(ctx, method, req, reply, cc, invoker, opts...)
		}
	})
	// With the ledger, a call that is not idempotent (Append) carries a
	// call id and holds its plugin's ledger; one that is (Get) costs what it
	// costs without.
	for _, m := range []struct{ name, method string }{{"append", "/respawn.test.v1.Test/Append"}, {"get", method}} {
		b.Run("stack=respawn-ledger/call="+m.name, func(b *testing.B) {
			unary := asChained(interceptor.New(interceptor.WithLedger()).UnaryClientInterceptor(h))
			mustSucceed(b, unary(ctx, m.method, req, reply, cc, invoker, opts...))
			b.ReportAllocs()
			for b.Loop() {
				_ = unary(ctx, m.method, req, reply, cc, invoker, opts...)
			}
		})
	}
	// A stub dispensed from a go-plugin client stays bound to that first
	// connection: after a respawn every one of its calls is rerouted.
	b.Run("stack=respawn-rerouted", func(b *testing.B) {
		if _, err := h.Replace(ctx, rc.Current(), errors.New("replaced for the benchmark")); err != nil {
			b.Fatal(err)
		}
		unary := asChained(interceptor.New().UnaryClientInterceptor(h))
		mustSucceed(b, unary(ctx, method, req, reply, cc, invoker, opts...))
		b.ReportAllocs()
		for b.Loop() {
			_ = unary(ctx, method, req, reply, cc, invoker, opts...)
		}
	})
}

// mustSucceed fails b if the call it is given failed: a loop that ignores
// errors would time a broken interceptor's early return as a speed-up.
func mustSucceed(b *testing.B, err error) {
	b.Helper()
	if err != nil {
		b.Fatalf("call through the interceptor: %v", err)
	}
}

// asChained hides i from the compiler, as grpc-go's interceptor chain does:
// a call through it is a call of a func value, which the compiler cannot
// inline into the benchmark loop. Inlined, the loop measured code shaped as
// no grpc-go call runs it: 2.5 ns where a call through the chain costs 12.
//
//go:noinline
func asChained(i grpc.UnaryClientInterceptor) grpc.UnaryClientInterceptor { return i }

// asInvoker does the same for the invoker, as grpc-go passes it.
//
//go:noinline
func asInvoker(i grpc.UnaryInvoker) grpc.UnaryInvoker { return i }
