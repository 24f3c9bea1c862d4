package interceptor

import (
	"strings"
	"time"

	"github.com/cenkalti/backoff/v4"
	"google.golang.org/grpc"
)

// Option configures a [Policy]; pass them to [New].
type Option interface{ apply(*options) }

type optionFunc func(*options)

func (f optionFunc) apply(o *options) { f(o) }

type options struct {
	maxAttempts  int
	backoff      func() backoff.BackOff
	methods      map[string]bool
	idempotency  func(method string) (idempotent, known bool)
	passthrough  func(method string) bool
	streamBuffer int
}

func defaultOptions() options {
	return options{
		maxAttempts:  4,
		backoff:      defaultBackOff,
		passthrough:  GoPluginMethod,
		streamBuffer: 64,
	}
}

func defaultBackOff() backoff.BackOff {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = 10 * time.Millisecond
	b.MaxInterval = time.Second
	b.MaxElapsedTime = 0 // attempts and the caller's deadline bound the retries
	b.Reset()            // NewExponentialBackOff started from its own 500ms
	return b
}

// WithMaxAttempts bounds the attempts of one call, the first included, so 1
// never retries. The caller's deadline bounds them too. Default 4; zero or
// negative means the default.
func WithMaxAttempts(n int) Option {
	return optionFunc(func(o *options) {
		if n > 0 {
			o.maxAttempts = n
		}
	})
}

// WithBackOff sets the wait between retries of one call after the first
// retry (which follows a fresh respawn and runs at once). newBackOff is
// called once per failing call, since a BackOff is not safe for concurrent
// use. Default: exponential from 10ms, capped at 1s. nil means the default.
func WithBackOff(newBackOff func() backoff.BackOff) Option {
	return optionFunc(func(o *options) {
		if newBackOff != nil {
			o.backoff = newBackOff
		}
	})
}

// WithIdempotentMethods declares full method names ("/pkg.Service/Method")
// safe to run twice. It overrides the proto option idempotency_level and is
// overridden by the per-call [Idempotent] option.
func WithIdempotentMethods(methods ...string) Option {
	return optionFunc(func(o *options) {
		if o.methods == nil {
			o.methods = make(map[string]bool)
		}
		for _, m := range methods {
			o.methods[m] = true
		}
	})
}

// WithIdempotencyFunc decides idempotency by method name. known false defers
// to the proto option idempotency_level. It is consulted after
// [WithIdempotentMethods], only when a call has failed, and must be safe for
// concurrent use.
func WithIdempotencyFunc(f func(method string) (idempotent, known bool)) Option {
	return optionFunc(func(o *options) { o.idempotency = f })
}

// WithPassthrough names methods that are sent exactly where they were sent:
// never rerouted to the current plugin, never retried, and never taken as a
// sign that the plugin died. Default [GoPluginMethod]. nil means none.
func WithPassthrough(f func(method string) bool) Option {
	return optionFunc(func(o *options) {
		if f == nil {
			f = func(string) bool { return false }
		}
		o.passthrough = f
	})
}

// WithStreamBuffer bounds how many messages a server-streaming call may send
// before its first response and still be retried. Default 64; zero or
// negative means the default.
func WithStreamBuffer(n int) Option {
	return optionFunc(func(o *options) {
		if n > 0 {
			o.streamBuffer = n
		}
	})
}

// GoPluginMethod reports whether method is one hashicorp/go-plugin or a
// health checker sends on its own: the broker, controller and stdio services
// and grpc.health.v1. They belong to one plugin instance: a Shutdown meant for
// a dead plugin must not reach its successor, and killing an old client must
// never wait on a respawn.
func GoPluginMethod(method string) bool {
	return strings.HasPrefix(method, "/plugin.GRPCBroker/") ||
		strings.HasPrefix(method, "/plugin.GRPCController/") ||
		strings.HasPrefix(method, "/plugin.GRPCStdio/") ||
		strings.HasPrefix(method, "/grpc.health.v1.Health/")
}

// Idempotent is a per-call option that says whether this call may run twice.
// It overrides every other source.
func Idempotent(ok bool) grpc.CallOption { return idempotentOption{ok: ok} }

type idempotentOption struct {
	grpc.EmptyCallOption
	ok bool
}
