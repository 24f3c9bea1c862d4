//go:build unix

// Command ledger is a hashicorp/go-plugin host whose plugin is SIGKILLed
// in the middle of a write that must not run twice, and whose write still
// completes exactly once: the plugin keeps a ledger (package ledger, its
// ServerOptions in its GRPCServer func) and the host retries through
// it (interceptor.WithLedger).
//
// The plugin's Deposit adds to a balance kept in a file, outside the
// process, so a new plugin has it. A deposit killed after it completed is
// answered from the dead plugin's ledger; one killed in its handler, from
// the plugin's resolver, which looks the call id up in its deposits file
// and, if the deposit is not there, makes it. Without the ledger, a deposit
// killed after it completed or in its handler fails with
// interceptor.ErrOutcomeUnknown, though it ran.
//
// The plugin is this very binary: go-plugin launches it with its magic
// cookie in the environment, and main then serves the plugin. It needs
// nothing but respawn, go-plugin, grpc-go and protobuf's well-known types.
// Run it from the repository root, or as the package's testable Example:
//
//	go run ./examples/ledger
//	go test ./examples/ledger
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/grpc-respawn/respawn"
	"github.com/grpc-respawn/respawn/goplugin"
	"github.com/grpc-respawn/respawn/interceptor"
	"github.com/grpc-respawn/respawn/redial"
)

func main() {
	if isPlugin() {
		servePlugin()
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := run(ctx, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "ledger:", err)
		os.Exit(1)
	}
}

// run is the story, told twice: with the ledger, then without it. It
// writes what happens to out, without pids or call ids, so that the
// Example can check it.
func run(ctx context.Context, out io.Writer) error {
	dir, err := os.MkdirTemp("", "respawn-ledger-example-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if err := withLedger(ctx, out, filepath.Join(dir, "with.deposits")); err != nil {
		return err
	}
	return withoutLedger(ctx, out, filepath.Join(dir, "without.deposits"))
}

// connect starts the plugin, its deposits in the file at path, as a
// go-plugin host would with plugin.NewClient and Client, and dispenses its
// Account once: the stub goes on across respawns.
func connect(ctx context.Context, path string, how *answers, opts ...interceptor.Option) (*goplugin.Conn, Account, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, nil, err
	}
	// The host's ClientConfig, built anew for every launch: go-plugin
	// mutates it, and an exec.Cmd runs once.
	config := func() *plugin.ClientConfig {
		cmd := exec.Command(self)
		cmd.Env = []string{depositsEnv + "=" + path} // go-plugin adds the host's environment
		return &plugin.ClientConfig{
			HandshakeConfig:  handshake,
			Plugins:          plugins(nil),
			Cmd:              cmd,
			AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
			Logger:           hclog.NewNullLogger(),
			GRPCDialOptions:  []grpc.DialOption{grpc.WithChainUnaryInterceptor(how.note)},
		}
	}
	rc, err := goplugin.Connect(ctx, goplugin.Config{Client: config},
		respawn.WithCalls(opts...), respawn.WithConn(redial.WithName(pluginName)))
	if err != nil {
		return nil, nil, err
	}
	raw, err := rc.Dispense(ctx, pluginName)
	if err != nil {
		rc.Close()
		return nil, nil, err
	}
	return rc, raw.(Account), nil
}

// crash asks the plugin to die during the call (the demo's switch, see
// demoCrashKey): "after" the deposit completed, "in" its handler after it
// wrote the deposit, "in-before" before; "" asks nothing.
func crash(ctx context.Context, when string) context.Context {
	if when == "" {
		return ctx
	}
	return metadata.AppendToOutgoingContext(ctx, demoCrashKey, when)
}

func withLedger(ctx context.Context, out io.Writer, path string) error {
	// The host keeps its calls in the plugins' ledgers; Balance may run
	// twice, Deposit not.
	var how answers
	rc, stub, err := connect(ctx, path, &how, interceptor.WithLedger(), interceptor.WithIdempotentMethods(balanceMethod))
	if err != nil {
		return err
	}
	defer rc.Close()
	steps := []struct {
		amount int64
		crash  string
		say    string
	}{
		{10, "", "deposit 10"},
		{20, "after", "deposit 20, the plugin is killed after the deposit and before its answer"},
		{5, "in", "deposit 5, the plugin is killed in its handler after it wrote the deposit"},
		{7, "in-before", "deposit 7, the plugin is killed in its handler before it wrote the deposit"},
	}
	for _, s := range steps {
		balance, err := stub.Deposit(crash(ctx, s.crash), s.amount)
		if err != nil {
			return fmt.Errorf("deposit %d: %w", s.amount, err)
		}
		fmt.Fprintf(out, "%s: balance %d%s\n", s.say, balance, how.last())
	}
	balance, err := stub.Balance(ctx)
	if err != nil {
		return err
	}
	deposits, err := readDeposits(path)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "deposits on file: %d, %s; balance %d; respawns: %d\n",
		len(deposits), once(deposits), balance, rc.Stats().Respawns)
	return rc.Close()
}

// answers notes how the plugin answered the last deposit sent to it, from
// the trailers of each attempt: the ledger's x-respawn-ledger, and the one
// the demo's resolver sets. It is safe for concurrent use.
type answers struct {
	mu  sync.Mutex
	how string
}

// note is a unary client interceptor on each plugin's connection: it sees
// every attempt of a call, a retry on a new plugin included.
func (a *answers) note(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	var md metadata.MD
	err := invoker(ctx, method, req, reply, cc, append(opts, grpc.Trailer(&md))...)
	if method != depositMethod {
		return err
	}
	how := ""
	switch {
	case slices.Contains(md.Get("x-respawn-ledger"), "replayed"):
		how = " (answered from the dead plugin's ledger; it did not run again)"
	case slices.Contains(md.Get(resolvedKey), resolvedOnFile):
		how = " (the plugin's resolver found it had taken effect)"
	case slices.Contains(md.Get(resolvedKey), resolvedMadeNow):
		how = " (the plugin's resolver found it had not taken effect, and made it)"
	}
	a.mu.Lock()
	a.how = how
	a.mu.Unlock()
	return err
}

// last says how the last deposit was answered, if not plainly.
func (a *answers) last() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.how
}

// once says whether every call id in ds is there once.
func once(ds []depositLine) string {
	seen := make(map[string]bool, len(ds))
	for _, d := range ds {
		if seen[d.id] {
			return "call " + d.id + " twice"
		}
		seen[d.id] = true
	}
	return "each once"
}

func withoutLedger(ctx context.Context, out io.Writer, path string) error {
	fmt.Fprintln(out, "without the host's WithLedger, the same two kills:")
	rc, stub, err := connect(ctx, path, new(answers), interceptor.WithIdempotentMethods(balanceMethod))
	if err != nil {
		return err
	}
	defer rc.Close()
	for _, s := range []struct {
		amount int64
		crash  string
	}{{20, "after"}, {5, "in"}} {
		_, err := stub.Deposit(crash(ctx, s.crash), s.amount)
		deposits, rerr := readDeposits(path)
		if rerr != nil {
			return rerr
		}
		fmt.Fprintf(out, "deposit %d, killed %s: errors.Is(err, interceptor.ErrOutcomeUnknown) = %t, yet it ran: deposits on file %d\n",
			s.amount, map[string]string{"after": "after it", "in": "in its handler"}[s.crash],
			errors.Is(err, interceptor.ErrOutcomeUnknown), len(deposits))
	}
	return rc.Close()
}
