package goplugin

import (
	"context"
	"errors"
	"time"

	"github.com/hashicorp/go-plugin"

	"github.com/grpc-respawn/respawn"
	"github.com/grpc-respawn/respawn/redial"
	hook "github.com/grpc-respawn/respawn/redial/goplugin"
)

// Config is what [Connect] needs beyond respawn's own options.
type Config struct {
	// Client returns the host's ClientConfig for one launch. It must return
	// a new ClientConfig, with a new, unstarted Cmd, each time: go-plugin
	// mutates the config it is given and an exec.Cmd runs only once. The
	// config may set anything a go-plugin host sets (AutoMTLS,
	// SecureConfig, Logger, GRPCDialOptions, StartTimeout...) except
	// Reattach and RunnerFunc, which cannot be respawned. Required.
	Client func() *plugin.ClientConfig
	// Init, if non-nil, pushes the host's state into every plugin
	// launched, the first one included, before any call reaches it: it
	// dispenses from client and calls the plugin's own set-up methods
	// (Velero's Init(config), a Configure, a Put of settings), under the
	// respawn's context; the calls it makes go straight to the new plugin,
	// without being rerouted or retried. If it fails or panics, the new
	// plugin is killed and the respawn fails; redial then respawns again
	// while the caller's attempts last, backing off. A spare
	// (redial.Pacing.Spares) runs it when it is promoted, not at its launch.
	Init func(ctx context.Context, client plugin.ClientProtocol) error
	// StopGrace is how long stopping a live plugin waits for go-plugin's
	// graceful Shutdown before it SIGKILLs the plugin's process group.
	// Zero means 2s; negative means SIGKILL at once.
	StopGrace time.Duration
	// StopTimeout bounds a whole stop: the graceful part, the SIGKILL, the
	// reaping and the rest of go-plugin's Client.Kill. Zero or negative
	// means 5s.
	StopTimeout time.Duration
}

// Conn is a redial.Conn to go-plugin plugins, made by [Connect]: calls on
// it, and on the stubs [Conn.Dispense] returns, go to the current plugin,
// and those safe to retry are retried on a fresh one when a plugin dies.
// It is safe for concurrent use; the zero value is not usable.
type Conn struct {
	*redial.Conn
	hook *hook.Hook
}

// Connect starts the first plugin and returns a Conn that respawns it
// whenever it dies or hangs: respawn.New's Conn (respawn's call policy and
// health watch, configured with opts) with the go-plugin hook of package
// redial/goplugin, which launches one go-plugin client per plugin
// instance. A launch that fails is tried again, as redial.Conn.Connect
// does, under the Conn's backoff and crash-loop breaker, until a plugin is up or ctx is done: call Connect
// once with the time the host may wait, not in a loop, since every Conn
// has a breaker of its own. It fails if cfg.Client is nil, opts are
// wrong, a failure is permanent (redial.ErrPermanent), or ctx ends first;
// then it has stopped every plugin it started, whatever a Config.Init
// that ignores its ctx is still doing. Close the Conn to stop the plugin.
func Connect(ctx context.Context, cfg Config, opts ...respawn.Option) (*Conn, error) {
	if cfg.Client == nil {
		return nil, errors.New("goplugin: Connect: Config.Client is nil")
	}
	h := &hook.Hook{Client: cfg.Client, Init: cfg.Init, StopGrace: cfg.StopGrace, StopTimeout: cfg.StopTimeout}
	rc, err := respawn.New(h, opts...)
	if err != nil {
		return nil, err
	}
	if err := rc.Connect(ctx); err != nil {
		_ = rc.Close()
		return nil, err
	}
	return &Conn{Conn: rc, hook: h}, nil
}

// Dispense returns the plugin name from the current plugin instance, as
// go-plugin's ClientProtocol.Dispense does. Dispense once and keep the
// result: its calls are routed to whichever instance is current, and
// retried there when safe. A plugin whose stubs are bound to one instance
// (go-plugin's GRPCBroker) needs [DispenseEach] instead.
func (c *Conn) Dispense(ctx context.Context, name string) (any, error) {
	if c == nil || c.hook == nil {
		return nil, errors.New("goplugin: Dispense on a Conn not made by Connect")
	}
	if err := c.Connect(ctx); err != nil {
		return nil, err
	}
	return c.hook.Dispense(c.Current(), name)
}
