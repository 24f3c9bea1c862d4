package goplugin

import (
	"context"
	"time"

	"github.com/hashicorp/go-plugin"
)

// option configures a hook; pass them to newHook.
type option interface{ apply(*options) }

type optionFunc func(*options)

func (f optionFunc) apply(o *options) { f(o) }

// initFunc is Config.Init.
type initFunc = func(ctx context.Context, client plugin.ClientProtocol) error

type options struct {
	init        initFunc
	stopTimeout time.Duration
	stopGrace   time.Duration
}

func defaultOptions() options {
	return options{stopTimeout: 5 * time.Second, stopGrace: 2 * time.Second}
}

// withInit runs init on every plugin the hook launches, the first one
// included, after go-plugin has connected to it and before redial sees it.
// So the state the host had pushed into the plugin that died is replayed
// before any call is retried on its successor, and the host's set-up lives
// in one place. If init fails (or panics), the new plugin is killed and the
// respawn fails; redial then respawns again while the caller's attempts
// last, backing off. A spare (redial.Pacing.Spares) is the exception: its
// init runs when redial promotes it (the spare's redial.Backend.Promote),
// not at its launch. Default: none.
// nil means none.
func withInit(init initFunc) option {
	return optionFunc(func(o *options) { o.init = init })
}

// withStopTimeout bounds how long stopping a plugin may take: the graceful
// stop (see withStopGrace), the SIGKILL, the reaping and the rest of
// go-plugin's Client.Kill, which waits for its goroutines. Past it, Stop
// returns an error and the rest of the clean-up goes on in the background.
// It also bounds the clean-up of a launch abandoned when the respawn's
// context ends. Default 5s; zero or negative means the default.
func withStopTimeout(d time.Duration) option {
	return optionFunc(func(o *options) {
		if d > 0 {
			o.stopTimeout = d
		}
	})
}

// withStopGrace is how long stopping a live plugin waits for it to exit
// after go-plugin's Client.Kill has asked it to (the controller's Shutdown
// RPC), before it SIGKILLs the plugin's process group. go-plugin itself
// waits at most 2s before it kills the plugin, so a longer grace changes
// nothing. A plugin that has already exited is not asked. Default 2s; zero
// or negative means kill at once, without asking.
func withStopGrace(d time.Duration) option {
	return optionFunc(func(o *options) { o.stopGrace = max(d, 0) })
}
