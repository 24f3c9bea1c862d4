package goplugin

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"github.com/hashicorp/go-plugin/runner"
	"google.golang.org/grpc"

	"github.com/grpc-respawn/respawn/redial"
	"github.com/grpc-respawn/respawn/redial/internal/proc"
)

// Hook is the go-plugin hook: a redial.Respawner that launches one
// hashicorp/go-plugin client per plugin instance, and adds the Conn's
// interceptors (those given to redial.WithDialOptions, then the policy's)
// to every client's GRPCDialOptions itself. Package goplugin at the
// module's top composes it with respawn's call policy and health watch:
// hosts use its Connect.
//
// A Hook is safe for concurrent use; its fields must not change once a
// Conn uses it. The zero Hook has no Client: every Respawn fails with an
// error.
type Hook struct {
	// Client returns the host's ClientConfig for one launch. It must
	// return a new ClientConfig, with a new, unstarted Cmd, each time:
	// go-plugin mutates the config it is given and an exec.Cmd runs only
	// once. The config may set anything a go-plugin host sets (AutoMTLS,
	// SecureConfig, Logger, GRPCDialOptions, StartTimeout...) except
	// Reattach and RunnerFunc, which cannot be respawned. Required.
	Client func() *plugin.ClientConfig
	// Init, if non-nil, runs on every plugin launched, the first one
	// included, after go-plugin has connected to it and before redial
	// sees it: so the state the host had pushed into the plugin that died
	// is replayed before any call is retried on its successor. If it
	// fails or panics, or ctx ends while it runs, the new plugin is
	// killed and the respawn fails. A spare (redial.Pacing.Spares) runs it
	// when redial promotes it (the spare's redial.Backend.Promote), not at
	// its launch.
	Init func(ctx context.Context, client plugin.ClientProtocol) error
	// StopGrace is how long stopping a live plugin waits for it to exit
	// after go-plugin's Client.Kill has asked it to (the controller's
	// Shutdown RPC), before it SIGKILLs the plugin's process group.
	// go-plugin itself waits at most 2s, so a longer grace changes
	// nothing. Zero means 2s; negative means SIGKILL at once, without
	// asking.
	StopGrace time.Duration
	// StopTimeout bounds a whole stop: the graceful part, the SIGKILL,
	// the reaping and the rest of go-plugin's Client.Kill, which waits for
	// its goroutines. Past it, the stop returns an error and the clean-up
	// goes on in the background. It also bounds the clean-up of a launch
	// abandoned when the respawn's context ends. Zero or negative means
	// 5s.
	StopTimeout time.Duration

	mu      sync.Mutex
	clients map[*grpc.ClientConn]*plugin.Client // live clients by their connection
}

var _ redial.Respawner = (*Hook)(nil)

// stopGrace is StopGrace with its default.
func (h *Hook) stopGrace() time.Duration {
	if h.StopGrace == 0 {
		return 2 * time.Second
	}
	return max(h.StopGrace, 0)
}

// stopTimeout is StopTimeout with its default.
func (h *Hook) stopTimeout() time.Duration {
	if h.StopTimeout <= 0 {
		return 5 * time.Second
	}
	return h.StopTimeout
}

// Respawn launches a go-plugin client and returns its gRPC connection, its
// process and a Stop that ends both: gracefully (go-plugin's Shutdown) for
// a live plugin, with a SIGKILL of its process group after StopGrace. It
// implements redial.Respawner; redial calls it, a host does not.
//
// To the config it adds req.DialOptions (the Conn's redial.WithDialOptions,
// then the policy's) to GRPCDialOptions, after the config's own: those run
// first, once per call, and the transport credentials are go-plugin's (give
// redial.WithDialOptions none). It allows the gRPC protocol,
// bounds StartTimeout by the time left in ctx, and clears Managed (redial,
// not plugin.CleanupClients, owns the client). It launches the binary
// through its own runner, which reports the process's exit, with its code
// or signal, as soon as it happens. Then it runs Init.
//
// The plugin leads a process group of its own, as package command's do: a
// plugin launched as go-plugin's examples do, exec.Command("sh", "-c",
// bin), is killed with the shell, as are the plugin's own children, and
// the Process redial reports is the group's (its leader's pid; it is done
// when the leader exits, and then the rest of the group is killed). On
// Windows the process alone is terminated. On Linux the plugin is also
// SIGKILLed if the host dies without stopping it: the hook sets
// Cmd.SysProcAttr.Pdeathsig unless the config set one, and forks it from
// an OS thread kept while any plugin it started runs (Linux sends that
// signal when the thread that forked the child ends).
func (h *Hook) Respawn(ctx context.Context, req redial.Request) (redial.Backend, error) {
	if h == nil || h.Client == nil {
		return redial.Backend{}, errors.New("goplugin: the Hook has no Client config func")
	}
	cfg := h.Client()
	if cfg == nil {
		return redial.Backend{}, errors.New("goplugin: the Hook's Client config func returned nil")
	}
	l, err := h.prepare(ctx, cfg, req)
	if err != nil {
		return redial.Backend{}, err
	}
	cp, err := l.start(ctx)
	if err != nil {
		return redial.Backend{}, err
	}
	gc, ok := cp.(*plugin.GRPCClient)
	if !ok {
		return redial.Backend{}, l.fail(redial.Permanent(fmt.Errorf("goplugin: the plugin speaks %T, not gRPC: only gRPC plugins can be respawned", cp)))
	}
	if err := h.initUnlessSpare(ctx, cp, req); err != nil {
		if ctx.Err() != nil {
			l.abandon() // the respawn is over: no time to ask the plugin
		}
		return redial.Backend{}, l.fail(fmt.Errorf("goplugin: init of plugin %d: %w", req.Generation, err))
	}
	h.mu.Lock()
	if h.clients == nil {
		h.clients = make(map[*grpc.ClientConn]*plugin.Client)
	}
	h.clients[gc.Conn] = l.client
	h.mu.Unlock()
	stop := func() error {
		h.mu.Lock()
		delete(h.clients, gc.Conn)
		h.mu.Unlock()
		return l.stop()
	}
	b := redial.Backend{Conn: gc.Conn, Process: proc.Public(l.process()).(*redial.Process), Stop: stop}
	if req.Spare && h.Init != nil {
		b.Promote = func(ctx context.Context) error { return h.promote(ctx, gc.Conn) }
	}
	return b, nil
}

// Dispense returns the plugin name dispensed from the go-plugin client that
// launched g, as go-plugin's ClientProtocol.Dispense does; it fails if h
// did not launch g or has stopped it. The stub is bound to g's connection:
// on a Conn with respawn's call policy its calls go to whichever plugin is
// current.
func (h *Hook) Dispense(g *redial.Generation, name string) (any, error) {
	c := h.client(g)
	if c == nil {
		if g == nil {
			return nil, errors.New("goplugin: Dispense: no plugin")
		}
		return nil, fmt.Errorf("goplugin: plugin %d was not launched by this hook or is already retired", g.Number())
	}
	cp, err := c.Client()
	if err != nil {
		return nil, err
	}
	return cp.Dispense(name)
}

// client returns the go-plugin client that launched g, or nil if g was not
// launched by h or has been stopped.
func (h *Hook) client(g *redial.Generation) *plugin.Client {
	if h == nil || g == nil {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.clients[g.ClientConn()]
}

// runInit runs Init and returns its error, or an error
// as soon as ctx ends, whatever the function is still doing: a function
// that ignores its ctx (calls the plugin with context.Background()) must
// not keep the launch, and with it the plugin, alive. A panic, or
// runtime.Goexit, fails the launch rather than leaving a plugin behind.
func (h *Hook) runInit(ctx context.Context, cp plugin.ClientProtocol) error {
	if h.Init == nil {
		return nil
	}
	done := make(chan error, 1)
	go func() {
		returned := false
		defer func() {
			if r := recover(); r != nil {
				done <- fmt.Errorf("panic: %v", r)
			} else if !returned {
				done <- errors.New("it called runtime.Goexit")
			}
		}()
		err := h.Init(ctx, cp)
		returned = true
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("abandoned while it ran: %w", context.Cause(ctx))
	}
}

// launch is one go-plugin client and the process its runner started.
type launch struct {
	client    *plugin.Client
	runner    atomic.Pointer[procRunner] // set by go-plugin's Start, via RunnerFunc
	socketDir atomic.Pointer[string]     // go-plugin's temp dir for this plugin
	timeout   time.Duration              // bounds stop
	grace     time.Duration              // how long stop waits for a graceful exit
	versions  map[int]bool               // API versions the config accepts
	proto     plugin.ClientProtocol      // go-plugin's client of the plugin, once started

	once sync.Once
	err  error
}

// prepare rewrites cfg for redial and creates the client (which does no I/O
// until start).
func (h *Hook) prepare(ctx context.Context, cfg *plugin.ClientConfig, req redial.Request) (*launch, error) {
	switch {
	case cfg.Reattach != nil:
		return nil, errors.New("goplugin: a ClientConfig with Reattach cannot be respawned; give Cmd")
	case cfg.RunnerFunc != nil:
		return nil, errors.New("goplugin: ClientConfig.RunnerFunc is not supported; give Cmd")
	case cfg.Cmd == nil:
		return nil, errors.New("goplugin: ClientConfig.Cmd is nil")
	case cfg.Cmd.Process != nil:
		return nil, errors.New("goplugin: ClientConfig.Cmd was already started; the config func must build a new one each time")
	}
	l := &launch{timeout: h.stopTimeout(), grace: h.stopGrace()}
	// go-plugin allows Cmd or RunnerFunc, not both: the Cmd moves into our
	// runner, and so does the checksum check, which go-plugin would
	// otherwise run on the RunnerFunc's empty placeholder command.
	cmd, secure := cfg.Cmd, cfg.SecureConfig
	cfg.Cmd, cfg.SecureConfig = nil, nil
	cfg.RunnerFunc = func(_ hclog.Logger, spec *exec.Cmd, socketDir string) (runner.Runner, error) {
		l.socketDir.Store(&socketDir)
		if secure != nil {
			ok, err := secure.Check(cmd.Path)
			if err != nil {
				return nil, fmt.Errorf("error verifying checksum: %w", err)
			}
			if !ok {
				return nil, plugin.ErrChecksumsDoNotMatch
			}
		}
		// spec carries what go-plugin would have given Cmd: the host's
		// environment (unless SkipHostEnv), the magic cookie, the socket
		// dir, the AutoMTLS client certificate, and stdin; then what redial
		// needs set (a ledger file).
		cmd.Env = append(append(slices.Clip(cmd.Env), spec.Env...), req.Env...)
		cmd.Stdin = spec.Stdin
		r := newProcRunner(cmd)
		l.runner.Store(r)
		return r, nil
	}
	cfg.GRPCDialOptions = append(slices.Clip(cfg.GRPCDialOptions), req.DialOptions...)
	if !slices.Contains(cfg.AllowedProtocols, plugin.ProtocolGRPC) {
		cfg.AllowedProtocols = append(slices.Clip(cfg.AllowedProtocols), plugin.ProtocolGRPC)
	}
	if cfg.StartTimeout <= 0 {
		cfg.StartTimeout = time.Minute // go-plugin's default
	}
	if dl, ok := ctx.Deadline(); ok {
		left := time.Until(dl)
		if left <= 0 {
			return nil, fmt.Errorf("goplugin: no time left to start a plugin: %w", context.Cause(ctx))
		}
		cfg.StartTimeout = min(cfg.StartTimeout, left)
	}
	cfg.Managed = false
	l.versions = acceptedVersions(cfg)
	l.client = plugin.NewClient(cfg)
	return l, nil
}

// start runs go-plugin's Client (launch, handshake, dial) and gives up when
// ctx ends, killing the process so that go-plugin stops waiting for it.
func (l *launch) start(ctx context.Context) (plugin.ClientProtocol, error) {
	type result struct {
		cp  plugin.ClientProtocol
		err error
	}
	ch := make(chan result, 1)
	go func() {
		cp, err := l.client.Client()
		ch <- result{cp, err}
	}()
	select {
	case r := <-ch:
		if r.err != nil {
			if p := l.process(); p != nil {
				p.Abandon() // a plugin that died at start crashed
			}
			_ = l.stop()
			return nil, l.explain(r.err)
		}
		l.proto = r.cp
		return r.cp, nil
	case <-ctx.Done():
	}
	l.abandon()
	t := time.NewTimer(l.timeout)
	defer t.Stop()
	select {
	case r := <-ch:
		l.proto = r.cp // nil unless it started after all: stop closes it
		_ = l.stop()
	case <-t.C:
		go func() { r := <-ch; l.proto = r.cp; _ = l.stop() }()
	}
	return nil, fmt.Errorf("goplugin: start abandoned: %w", context.Cause(ctx))
}

// process returns the plugin's process once the runner has started it.
func (l *launch) process() *proc.Process {
	if r := l.runner.Load(); r != nil {
		return r.proc.Load()
	}
	return nil
}
