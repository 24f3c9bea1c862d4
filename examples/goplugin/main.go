//go:build unix

// Command goplugin is a hashicorp/go-plugin host that survives the SIGKILL
// of its plugin: the host as go-plugin's examples write it, with
// goplugin.Connect where it called plugin.NewClient and Client. The host
// pushes its config into the plugin; goplugin.Config.Init pushes it again
// into every new plugin, so that after each kill the stub the host
// dispensed once answers from a fresh plugin that knows the host's current
// config.
//
// The plugin is this very binary: go-plugin launches it with its magic
// cookie in the environment, and main then serves the plugin. It needs
// nothing but respawn, go-plugin, grpc-go and protobuf's well-known types:
// copy it as it is. Run it from the repository root, or as the package's
// testable Example:
//
//	go run ./examples/goplugin
//	go test ./examples/goplugin
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"

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
		fmt.Fprintln(os.Stderr, "goplugin:", err)
		os.Exit(1)
	}
}

// hostConfig is the host's state that every plugin must have: what the
// host last pushed. It is safe for concurrent use.
type hostConfig struct {
	mu    sync.Mutex
	value string
}

func (h *hostConfig) get() string  { h.mu.Lock(); defer h.mu.Unlock(); return h.value }
func (h *hostConfig) set(v string) { h.mu.Lock(); defer h.mu.Unlock(); h.value = v }

// run is the story; it writes what happens to out, without pids, so that
// the Example can check it.
func run(ctx context.Context, out io.Writer) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	// The host's ClientConfig, unchanged, built anew for every launch:
	// go-plugin mutates it, and an exec.Cmd runs once.
	config := func() *plugin.ClientConfig {
		return &plugin.ClientConfig{
			HandshakeConfig:  handshake,
			Plugins:          plugins(nil),
			Cmd:              exec.Command(self),
			AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
			Logger:           hclog.NewNullLogger(),
		}
	}
	// What the host tells each plugin at start, like Velero's Init(config):
	// Config.Init runs it on every new plugin before any call reaches it.
	var state hostConfig
	pushConfig := func(ctx context.Context, c plugin.ClientProtocol) error {
		raw, err := c.Dispense(pluginName)
		if err != nil {
			return err
		}
		return raw.(Configurable).Configure(ctx, state.get())
	}

	// Where a go-plugin host calls plugin.NewClient and Client, it calls
	// goplugin.Connect: it starts the plugin, and respawns it whenever it
	// dies or hangs. The methods that may run twice are retried.
	rc, err := goplugin.Connect(ctx, goplugin.Config{Client: config, Init: pushConfig},
		respawn.WithCalls(interceptor.WithIdempotentMethods(configureMethod, configMethod)),
		respawn.WithConn(redial.WithName(pluginName)))
	if err != nil {
		return err
	}
	defer rc.Close() // stops the plugin and its go-plugin client

	raw, err := rc.Dispense(ctx, pluginName) // once, kept across respawns
	if err != nil {
		return err
	}
	stub := raw.(Configurable)
	configure := func(v string) error { // the host changes its config
		state.set(v)
		return stub.Configure(ctx, v)
	}
	show := func(when string) (pid int, err error) {
		config, err := stub.Config(ctx)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", when, err)
		}
		fmt.Fprintf(out, "%s: the plugin's config is %q\n", when, config)
		return rc.Current().Process().PID, nil
	}

	if err := configure("v1"); err != nil {
		return err
	}
	before, err := show("first plugin")
	if err != nil {
		return err
	}
	for i, next := range []string{"", "v2"} {
		if next != "" {
			fmt.Fprintf(out, "the host changes its config to %q\n", next)
			if err := configure(next); err != nil {
				return err
			}
		}
		if err := kill(ctx, out, rc.Current().Process()); err != nil {
			return err
		}
		after, err := show(fmt.Sprintf("after kill %d", i+1))
		if err != nil {
			return err
		}
		fmt.Fprintln(out, "answered by a new process:", after != before)
		before = after
	}
	fmt.Fprintln(out, "respawns:", rc.Stats().Respawns)
	return rc.Close()
}

// kill SIGKILLs p from outside, as the OOM killer would, waits for it to be
// reaped and says how it ended.
func kill(ctx context.Context, out io.Writer, p *redial.Process) error {
	proc, err := os.FindProcess(p.PID)
	if err == nil {
		err = proc.Kill()
	}
	if err != nil {
		return err
	}
	select {
	case <-p.Done():
	case <-ctx.Done():
		return fmt.Errorf("plugin pid %d not reaped: %w", p.PID, ctx.Err())
	}
	e, _ := p.Exit()
	fmt.Fprintf(out, "plugin killed by signal %d (%v)\n", int(e.Signal), e.Signal)
	return nil
}
