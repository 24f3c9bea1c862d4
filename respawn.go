package respawn

import (
	"github.com/grpc-respawn/respawn/health"
	"github.com/grpc-respawn/respawn/interceptor"
	"github.com/grpc-respawn/respawn/redial"
)

// Option configures [New].
type Option interface{ apply(*options) }

type optionFunc func(*options)

func (f optionFunc) apply(o *options) { f(o) }

type options struct {
	conn   []redial.Option
	policy []interceptor.Option
	health health.Config
}

// WithConn passes options to redial.New, such as redial.WithName or
// redial.WithEventHandler. A redial.WithPolicy among them is an error:
// configure the call policy with [WithCalls].
func WithConn(opts ...redial.Option) Option {
	return optionFunc(func(o *options) { o.conn = append(o.conn, opts...) })
}

// WithCalls passes options to interceptor.New, the call policy New
// installs: idempotent methods, attempts, passthrough methods.
func WithCalls(opts ...interceptor.Option) Option {
	return optionFunc(func(o *options) { o.policy = append(o.policy, opts...) })
}

// WithHealth configures the health watcher New installs (health.Watch)
// so that a dead or hung plugin is replaced before a caller finds it.
// Without it, or with the zero health.Config, the watcher runs with
// health's defaults: a stopped (SIGSTOP) plugin is replaced within 3s on
// Linux, a plugin that stops answering and shows no sign of life within 4s,
// and a busy plugin whose process runs is not killed for answering late;
// see package health. health.Config{Off: true} turns it off. The last
// WithHealth wins.
func WithHealth(cfg health.Config) Option {
	return optionFunc(func(o *options) { o.health = cfg })
}

// New returns a redial.Conn that starts plugins with hook, routes every
// call to the current one, watches its health (unless health.Config.Off) and
// retries, on a fresh plugin, the calls that are safe to retry. Like
// redial.New it does no I/O: the first plugin starts with Connect or the
// first call. Close stops the health watch, then the plugin. A nil hook is
// an error, and so is a redial.WithPolicy among [WithConn]'s options: the
// Conn has one call policy, and New installs it.
func New(hook redial.Respawner, opts ...Option) (*redial.Conn, error) {
	var o options
	for _, opt := range opts {
		if opt != nil {
			opt.apply(&o)
		}
	}
	calls := interceptor.New(o.policy...)
	policy := policyFunc(func(h redial.Handle) redial.Binding {
		_ = health.Watch(h, o.health) // h is not nil
		return calls.Start(h)
	})
	return redial.New(hook, append([]redial.Option{redial.WithPolicy(policy)}, o.conn...)...)
}

// policyFunc adapts a function to a redial.Policy.
type policyFunc func(h redial.Handle) redial.Binding

func (f policyFunc) Start(h redial.Handle) redial.Binding { return f(h) }
