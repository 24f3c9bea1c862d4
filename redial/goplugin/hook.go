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

// hook is the redial.Respawner behind [Connect]: it launches one
// hashicorp/go-plugin client per plugin instance, and adds the Conn's
// interceptors (those given to redial.WithDialOptions, then the policy's)
// to every client's GRPCDialOptions itself.
//
// A hook is safe for concurrent use. Create it with newHook; the zero value
// has no config and every Respawn fails with an error.
type hook struct {
	config func() *plugin.ClientConfig
	opts   options

	mu      sync.Mutex
	clients map[*grpc.ClientConn]*plugin.Client // live clients by their connection
}

var _ redial.Respawner = (*hook)(nil)

// newHook returns a hook that calls config for every launch. config must return
// a new ClientConfig, with a new, unstarted Cmd, each time: go-plugin
// mutates the config it is given and an exec.Cmd runs only once. The
// config may set anything a go-plugin host sets (AutoMTLS, SecureConfig,
// Logger, GRPCDialOptions, StartTimeout...) except Reattach and RunnerFunc,
// which the hook cannot respawn.
func newHook(config func() *plugin.ClientConfig, opts ...option) *hook {
	h := &hook{config: config, opts: defaultOptions(), clients: make(map[*grpc.ClientConn]*plugin.Client)}
	for _, o := range opts {
		if o != nil {
			o.apply(&h.opts)
		}
	}
	return h
}

// Respawn launches a go-plugin client and returns its gRPC connection, its
// process and a Stop that ends both: gracefully (go-plugin's Shutdown) for
// a live plugin, with a SIGKILL of its process group after the
// withStopGrace period. It implements redial.Respawner; redial
// calls it, a host does not.
//
// To the config it adds req.DialOptions (the Conn's redial.WithDialOptions,
// then the policy's) to GRPCDialOptions, after the config's own: those run
// first, once per call, and the transport credentials are go-plugin's (give
// redial.WithDialOptions none). It allows the gRPC protocol,
// bounds StartTimeout by the time left in ctx, and clears Managed (redial,
// not plugin.CleanupClients, owns the client). It launches the binary
// through its own runner, which reports the process's exit, with its code
// or signal, as soon as it happens. Then it runs the withInit function.
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
func (h *hook) Respawn(ctx context.Context, req redial.Request) (redial.Backend, error) {
	if h == nil || h.config == nil {
		return redial.Backend{}, errors.New("goplugin: hook has no config func; create the Conn with Connect")
	}
	cfg := h.config()
	if cfg == nil {
		return redial.Backend{}, errors.New("goplugin: the config func returned nil")
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
	h.clients[gc.Conn] = l.client
	h.mu.Unlock()
	stop := func() error {
		h.mu.Lock()
		delete(h.clients, gc.Conn)
		h.mu.Unlock()
		return l.stop()
	}
	b := redial.Backend{Conn: gc.Conn, Process: proc.Public(l.process()).(*redial.Process), Stop: stop}
	if req.Spare && h.opts.init != nil {
		b.Promote = func(ctx context.Context) error { return h.promote(ctx, gc.Conn) }
	}
	return b, nil
}

// Client returns the go-plugin client that launched g, or nil if g was not
// launched by h or has been stopped. Use it to dispense more plugin types or
// read its negotiated version; do not Kill it: redial does, when it retires
// g.
func (h *hook) client(g *redial.Generation) *plugin.Client {
	if h == nil || g == nil {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.clients[g.ClientConn()]
}

// Dispense starts rc's first plugin if none runs yet and dispenses name
// from the current plugin's client. Dispense once and keep the result: the
// stub stays bound to that first client's connection, and respawn's
// interceptors route its calls to whichever plugin is current.
func (h *hook) dispense(ctx context.Context, rc *redial.Conn, name string) (any, error) {
	if err := rc.Connect(ctx); err != nil {
		return nil, err
	}
	g := rc.Current()
	c := h.client(g)
	if c == nil {
		return nil, fmt.Errorf("goplugin: plugin %d was not launched by this hook or is already retired", g.Number())
	}
	cp, err := c.Client()
	if err != nil {
		return nil, err
	}
	return cp.Dispense(name)
}

// runInit runs the withInit function and returns its error, or an error
// as soon as ctx ends, whatever the function is still doing: a function
// that ignores its ctx (calls the plugin with context.Background()) must
// not keep the launch, and with it the plugin, alive. A panic, or
// runtime.Goexit, fails the launch rather than leaving a plugin behind.
func (h *hook) runInit(ctx context.Context, cp plugin.ClientProtocol) error {
	if h.opts.init == nil {
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
		err := h.opts.init(ctx, cp)
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
func (h *hook) prepare(ctx context.Context, cfg *plugin.ClientConfig, req redial.Request) (*launch, error) {
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
	l := &launch{timeout: h.opts.stopTimeout, grace: h.opts.stopGrace}
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
