//go:build unix

package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/grpc-respawn/respawn/ledger"
)

// depositsEnv names the environment variable that gives the plugin the
// path of its deposits file; the host sets it in Cmd.Env.
const depositsEnv = "LEDGER_EXAMPLE_DEPOSITS"

// accountServer is the plugin's Account. Its state outlives the process:
// each deposit is a line "<call id> <amount>" appended to a file, and the
// balance is their sum, so a new plugin has the balance its predecessors
// left. It is safe for concurrent use.
type accountServer struct {
	mu   sync.Mutex
	path string
}

func (s *accountServer) Deposit(ctx context.Context, amount int64) (int64, error) {
	// The call's ledger id, written beside the deposit, so that the
	// resolver can tell later whether a call took effect.
	id := ledger.CallID(ctx)
	if id == "" {
		id = "-" // a call the ledger does not record: a host without it
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	// The demo's crash switches, not something a plugin has: the plugin
	// dies in its handler, before the deposit is on file or after.
	if demoCrash(ctx) == "in-before" {
		die()
	}
	balance, err := s.deposit(id, amount)
	if err == nil && demoCrash(ctx) == "in" {
		die()
	}
	return balance, err
}

func (s *accountServer) Balance(context.Context) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	deposits, err := readDeposits(s.path)
	return sum(deposits), err
}

// resolveDeposit is the ledger's resolver for Deposit: a deposit whose
// plugin died in its handler took effect if its call id is on file, and
// the answer is the balance now; if it is not there, the deposit is made
// now. Either way the answer is known. It says which in the trailer
// resolvedKey, for the demo's host to tell.
func (s *accountServer) resolveDeposit(ctx context.Context, _, callID string, req any) (any, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	deposits, err := readDeposits(s.path)
	if err != nil {
		return nil, false
	}
	for _, d := range deposits {
		if d.id == callID {
			_ = grpc.SetTrailer(ctx, metadata.Pairs(resolvedKey, resolvedOnFile))
			return wrapperspb.Int64(sum(deposits)), true
		}
	}
	balance, err := s.deposit(callID, req.(*wrapperspb.Int64Value).GetValue())
	if err != nil {
		return nil, false
	}
	_ = grpc.SetTrailer(ctx, metadata.Pairs(resolvedKey, resolvedMadeNow))
	return wrapperspb.Int64(balance), true
}

// resolvedKey is the trailer of a deposit answered by resolveDeposit:
// resolvedOnFile if the deposit had taken effect, resolvedMadeNow if the
// resolver made it.
const (
	resolvedKey     = "x-example-resolved"
	resolvedOnFile  = "on-file"
	resolvedMadeNow = "made-now"
)

// deposit appends a deposit to the file and returns the new balance; the
// caller holds s.mu.
func (s *accountServer) deposit(id string, amount int64) (int64, error) {
	f, err := os.OpenFile(s.path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return 0, err
	}
	_, err = fmt.Fprintf(f, "%s %d\n", id, amount)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return 0, err
	}
	deposits, err := readDeposits(s.path)
	return sum(deposits), err
}

// A depositLine is one line of the deposits file.
type depositLine struct {
	id     string
	amount int64
}

// readDeposits reads the deposits file; a file not yet made has none.
func readDeposits(path string) ([]depositLine, error) {
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var ds []depositLine
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		id, amount, ok := strings.Cut(sc.Text(), " ")
		n, err := strconv.ParseInt(amount, 10, 64)
		if !ok || err != nil {
			return nil, fmt.Errorf("deposits file %s: bad line %q", path, sc.Text())
		}
		ds = append(ds, depositLine{id: id, amount: n})
	}
	return ds, sc.Err()
}

func sum(ds []depositLine) int64 {
	var n int64
	for _, d := range ds {
		n += d.amount
	}
	return n
}

// demoCrashKey asks the plugin to die during the call: "after" the call
// completed, before its answer is sent; "in" its handler, once the deposit
// is on file; "in-before" its handler, before the deposit is on file. Only a first attempt asks: a retry (x-retry-attempt) lives.
// It is the demo's, not something a plugin has.
const demoCrashKey = "x-demo-crash"

func demoCrash(ctx context.Context) string {
	if len(metadata.ValueFromIncomingContext(ctx, "x-retry-attempt")) > 0 {
		return ""
	}
	if v := metadata.ValueFromIncomingContext(ctx, demoCrashKey); len(v) > 0 {
		return v[0]
	}
	return ""
}

// crashAfter is the demo's crash switch around the ledger, not something
// a plugin has: given before the ledger's option, it runs first and returns
// last, so it kills the plugin once the ledger recorded the call complete
// and before gRPC sends the answer.
func crashAfter(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	resp, err := handler(ctx, req)
	if demoCrash(ctx) == "after" {
		die()
	}
	return resp, err
}

// die SIGKILLs the plugin, as the OOM killer would, and never returns.
func die() {
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {}
}

// isPlugin reports whether this process was launched by a go-plugin host
// as its plugin.
func isPlugin() bool {
	return os.Getenv(handshake.MagicCookieKey) == handshake.MagicCookieValue
}

// servePlugin is the plugin's main; go-plugin exits the process when the
// host stops it.
func servePlugin() {
	srv := &accountServer{path: os.Getenv(depositsEnv)}
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig: handshake,
		Plugins:         plugins(srv),
		GRPCServer: func(opts []grpc.ServerOption) *grpc.Server {
			// The ledger, as a plugin adds it: its ServerOptions, with a
			// resolver for the write it can check. The crash switch
			// before it is the demo's.
			opts = append(opts, grpc.ChainUnaryInterceptor(crashAfter))
			return grpc.NewServer(append(opts, ledger.ServerOptions(ledger.Config{
				Resolvers: map[string]func(context.Context, string, string, any) (any, bool){
					depositMethod: srv.resolveDeposit,
				},
			})...)...)
		},
		Logger: hclog.New(&hclog.LoggerOptions{Output: os.Stderr, Level: hclog.Warn}),
	})
}
