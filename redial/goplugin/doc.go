// Package goplugin lets a hashicorp/go-plugin host survive the death of its
// gRPC plugins. A [Hook] is a redial.Respawner that launches a fresh
// plugin.Client whenever redial asks for one; with respawn's call policy
// installed, stubs the host dispensed once from the first client keep
// working across any number of plugin deaths.
//
// # Setting up
//
//	hook := goplugin.New(func() *plugin.ClientConfig {
//		return &plugin.ClientConfig{ /* as before, with a new Cmd */ }
//	}, goplugin.WithInit(replayConfig))
//	rc, err := redial.New(hook, redial.WithPolicy(interceptor.New()))
//	...
//	defer rc.Close()
//	raw, err := hook.Dispense(ctx, rc, "kv")
//	kv := raw.(KV) // dispense once, use forever
//
// The Hook adds the policy's interceptors to each client's GRPCDialOptions,
// so the host does not; interceptors given to redial.WithDialOptions are
// added too, before the policy's. go-plugin's own calls (Shutdown on Kill, the broker
// and stdio streams, the "plugin" health check) pass through those
// interceptors untouched: they always reach the plugin instance they were
// meant for, and killing an old client never waits on a respawn.
//
// # Exits
//
// The Hook starts the plugin binary through its own runner, which reaps the
// process as soon as it exits and reports the exit, with its code or
// signal, to the redial.Process of the generation: an OOM kill shows up as
// SIGKILL in redial's exit event. go-plugin's Client.Exited only ever
// describes one client; ask redial instead.
//
// # State
//
// A fresh plugin knows nothing the host told its predecessor. [WithInit]
// replays it: its function runs on every new plugin before redial hands
// the plugin any call, and a failure fails that respawn (redial tries
// again, backing off).
//
// # Stopping
//
// redial owns every client the Hook launches: it stops a retired plugin
// after its grace period, or at once when its process has exited, and the
// current one on redial.Conn.Close. Stopping a live plugin asks it to exit
// (go-plugin's Client.Kill, whose controller Shutdown RPC ends it
// gracefully), SIGKILLs its process group after [WithStopGrace], and waits
// for the rest of Client.Kill, all bounded by [WithStopTimeout]. The host
// must not Kill these clients itself.
package goplugin
