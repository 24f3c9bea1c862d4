//go:build unix

package ledger_test

import (
	"context"
	"fmt"
	"log"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/grpc-respawn/respawn/ledger"
)

// journalService is the plugin's service, described by hand as
// protoc-gen-go-grpc would: Append adds a line and answers how many lines
// there are. It is not idempotent, so calls to it that carry respawn's call
// id are recorded.
var journalService = grpc.ServiceDesc{
	ServiceName: "example.Journal",
	HandlerType: (*any)(nil),
	Methods:     []grpc.MethodDesc{{MethodName: "Append", Handler: appendLine}},
}

var lines atomic.Int64

func appendLine(_ any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
	in := new(wrapperspb.StringValue)
	if err := dec(in); err != nil {
		return nil, err
	}
	handler := func(context.Context, any) (any, error) { return wrapperspb.Int64(lines.Add(1)), nil }
	if interceptor == nil {
		return handler(ctx, in)
	}
	return interceptor(ctx, in, &grpc.UnaryServerInfo{FullMethod: "/example.Journal/Append"}, handler)
}

// servePlugin is what a plugin's main does: its server options add the
// ledger. In a go-plugin plugin, they go in the ServeConfig's GRPCServer
// func instead:
//
//	GRPCServer: func(opts []grpc.ServerOption) *grpc.Server {
//		return grpc.NewServer(append(opts, ledger.ServerOptions(ledger.Config{})...)...)
//	},
func servePlugin(sock string) *grpc.Server {
	s := grpc.NewServer(ledger.ServerOptions(ledger.Config{})...)
	s.RegisterService(&journalService, nil)
	lis, err := net.Listen("unix", sock)
	if err != nil {
		log.Fatal(err)
	}
	go func() { _ = s.Serve(lis) }()
	return s
}

// callAppend calls Append as respawn's host does: with a ledger id, and on
// a retry naming the ledger files of the plugins that died with it. It
// returns the answer and the trailer that says whether it came from a
// ledger.
func callAppend(sock, id, retryOf string) (int64, string) {
	cc, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		log.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ctx = metadata.AppendToOutgoingContext(ctx, "x-respawn-ledger-id", id)
	if retryOf != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "x-respawn-ledger-retry", retryOf)
	}
	out, tr := new(wrapperspb.Int64Value), metadata.MD{}
	if err := cc.Invoke(ctx, "/example.Journal/Append", wrapperspb.String("a line"), out, grpc.Trailer(&tr)); err != nil {
		log.Fatal(err)
	}
	return out.GetValue(), fmt.Sprint(tr.Get("x-respawn-ledger"))
}

// launchPlugin does what respawn's host does before it starts a plugin: it makes
// the plugin's ledger file, empty, and names it and a key of the launch's
// in the environment.
func launchPlugin(dir, name string) {
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		log.Fatal(err)
	}
	os.Setenv("RESPAWN_LEDGER", path)
	os.Setenv("RESPAWN_LEDGER_KEY", "k"+strings.TrimSuffix(name, ".ledger"))
}

// A plugin that ran a call and died before its answer reached the host:
// the host retries the call on the plugin's successor with the same call
// id, and the successor answers from the dead plugin's ledger. Here the two
// plugins are two servers in one process, and the test does what respawn's
// host does: it makes the ledger directory, and launches each (launchPlugin).
func ExampleServerOptions() {
	dir, err := os.MkdirTemp("", "ledgers") // mode 0700, as the host makes it
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	defer os.Unsetenv("RESPAWN_LEDGER")
	socks, err := os.MkdirTemp("", "plugins")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(socks)

	launchPlugin(dir, "1.ledger")
	first := servePlugin(filepath.Join(socks, "1.sock"))
	callAppend(filepath.Join(socks, "1.sock"), "call-1", "")
	first.Stop() // the plugin dies; its answer, say, never arrived

	launchPlugin(dir, "2.ledger")
	second := servePlugin(filepath.Join(socks, "2.sock"))
	defer second.Stop()
	n, how := callAppend(filepath.Join(socks, "2.sock"), "call-1", "1.ledger")
	fmt.Println("answer:", n, how)
	fmt.Println("lines appended:", lines.Load())
	// Output:
	// answer: 1 [replayed]
	// lines appended: 1
}
