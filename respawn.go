package respawn

import (
	"errors"

	"github.com/grpc-respawn/respawn/health"
	"github.com/grpc-respawn/respawn/interceptor"
	"github.com/grpc-respawn/respawn/redial"
)

// Conn is a redial.Conn with respawn's call policy installed and a health
// watcher (unless [WithoutHealth]), which Close stops too. It is safe for
// concurrent use. Create one with [New]; the zero value is not usable.
type Conn struct {
	*redial.Conn
	watcher *health.Watcher
}

// Option configures [New].
type Option interface{ apply(*options) }

type optionFunc func(*options)

func (f optionFunc) apply(o *options) { f(o) }

type options struct {
	conn    []redial.Option
	policy  []interceptor.Option
	health  health.Config
	noWatch bool
}

// WithConn passes options to redial.New, such as redial.WithName or
// redial.WithEventHandler. A redial.WithPolicy among them replaces the
// policy New would install.
func WithConn(opts ...redial.Option) Option {
	return optionFunc(func(o *options) { o.conn = append(o.conn, opts...) })
}

// WithPolicy passes options to interceptor.New, the call policy New
// installs: idempotent methods, attempts, passthrough methods.
func WithPolicy(opts ...interceptor.Option) Option {
	return optionFunc(func(o *options) { o.policy = append(o.policy, opts...) })
}

// WithHealth configures the health watcher New installs (health.Watch)
// so that a dead or hung plugin is replaced before a caller finds it.
// Without it, or with the zero health.Config, the watcher runs with
// health's defaults: a stopped (SIGSTOP) plugin is replaced within 3s on
// Linux, a plugin that stops answering and shows no sign of life within 4s,
// and a busy plugin whose process runs is not killed for answering late;
// see package health. The last WithHealth wins.
func WithHealth(cfg health.Config) Option {
	return optionFunc(func(o *options) { o.health = cfg })
}

// WithoutHealth installs no health watcher: a plugin is then replaced when
// its process exits or a call finds it dead, and a hung one (stopped,
// deadlocked) is never replaced. It overrides [WithHealth].
func WithoutHealth() Option {
	return optionFunc(func(o *options) { o.noWatch = true })
}

// New returns a Conn that starts plugins with hook, routes every call to
// the current one, watches its health and retries, on a fresh plugin, the
// calls that are safe to retry. Like redial.New it does no I/O: the first plugin starts with
// Connect or the first call. A nil hook is an error.
func New(hook redial.Respawner, opts ...Option) (*Conn, error) {
	var o options
	for _, opt := range opts {
		if opt != nil {
			opt.apply(&o)
		}
	}
	ropts := append([]redial.Option{redial.WithPolicy(interceptor.New(o.policy...))}, o.conn...)
	rc, err := redial.New(hook, ropts...)
	if err != nil {
		return nil, err
	}
	c := &Conn{Conn: rc}
	if !o.noWatch {
		if c.watcher, err = health.Watch(rc, o.health); err != nil {
			_ = rc.Close()
			return nil, err
		}
	}
	return c, nil
}

// Close stops the health watcher, if any, then closes the redial.Conn,
// which stops the plugin; it returns the latter's error.
func (c *Conn) Close() error {
	if c == nil || c.Conn == nil {
		return errNotNew
	}
	if c.watcher != nil {
		c.watcher.Close()
	}
	return c.Conn.Close()
}

// errNotNew is Close's error for a Conn that New did not make.
var errNotNew = errors.New("respawn: Close of a Conn not made by New")
