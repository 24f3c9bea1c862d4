// Package goplugin is the entry for a hashicorp/go-plugin host that must
// survive the death of its gRPC plugins. [Connect] starts the plugin, as
// plugin.NewClient and Client do, and returns a [Conn] that launches a
// fresh plugin.Client whenever one dies or hangs: stubs the host dispensed
// once keep working across any number of plugin deaths.
//
// # Setting up
//
//	conn, err := goplugin.Connect(ctx, goplugin.Config{
//		Client: func() *plugin.ClientConfig {
//			return &plugin.ClientConfig{ /* as before, with a new Cmd */ }
//		},
//		Init: replayConfig,
//	}, respawn.WithCalls(interceptor.WithIdempotentMethods("/kv.KV/Get")))
//	...
//	defer conn.Close()
//	raw, err := conn.Dispense(ctx, "kv")
//	kv := raw.(KV) // dispense once, use forever
//
// The Conn is respawn.New's, with the go-plugin hook of package
// redial/goplugin: respawn's call policy routes every call to the current
// plugin and retries those safe to retry, and a health watch replaces a
// plugin that hangs. Its interceptors are added to each client's
// GRPCDialOptions, after those given to redial.WithDialOptions. go-plugin's
// own calls (Shutdown on Kill, the broker and stdio streams, the "plugin"
// health check) pass through them untouched: they always reach the plugin
// instance they were meant for, and killing an old client never waits on a
// respawn. interceptor.HostRPCs keeps them out of the host's own logging
// and metrics.
//
// # Exits
//
// A plugin's exit, with its code or signal, is reported as soon as it
// happens to the redial.Process of its generation: an OOM kill shows up as
// SIGKILL in redial's exit event. go-plugin's Client.Exited only ever
// describes one client; ask redial instead.
//
// # State
//
// A fresh plugin knows nothing the host told its predecessor.
// [Config].Init replays it: it runs on every new plugin before any call
// reaches the plugin, and a failure fails that respawn (redial tries
// again, backing off).
//
// # Stopping
//
// The Conn owns every client it launches: it stops a retired plugin after
// its grace period, or at once when its process has exited, and the
// current one on Close. Stopping a live plugin asks it to exit (go-plugin's
// Client.Kill, whose controller Shutdown RPC ends it gracefully), SIGKILLs
// its process group after [Config].StopGrace, and waits for the rest of
// Client.Kill, all bounded by [Config].StopTimeout. A plugin that has
// exited is not asked: its client is released without Client.Kill, which
// would log into the host's logger that the plugin "failed to exit
// gracefully". The host must not Kill these clients itself.
package goplugin
