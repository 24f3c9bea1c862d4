// Package goplugin is the go-plugin hook: [Hook] is a redial.Respawner
// that starts a hashicorp/go-plugin plugin, as plugin.NewClient and
// Client do, once per plugin instance, and stops it. A host does not use
// it directly: Connect, of package goplugin at the module's top
// (github.com/grpc-respawn/respawn/goplugin), gives a Hook to respawn.New,
// which adds respawn's call policy and health watch; this package imports
// neither.
//
// # Exits
//
// Each plugin binary starts through a runner of respawn's, which reaps the
// process as soon as it exits and reports the exit, with its code or
// signal, to the redial.Process of the generation: an OOM kill shows up as
// SIGKILL in redial's exit event. go-plugin's Client.Exited only ever
// describes one client; ask redial instead.
//
// # Stopping
//
// The Conn owns every client the Hook launches: it stops a retired plugin
// after its grace period, or at once when its process has exited, and the
// current one on Close. Stopping a live plugin asks it to exit (go-plugin's
// Client.Kill, whose controller Shutdown RPC ends it gracefully), SIGKILLs
// its process group after [Hook].StopGrace, and waits for the rest of
// Client.Kill, all bounded by [Hook].StopTimeout. A plugin that has exited
// is not asked: its client is released without Client.Kill, which would
// log into the host's logger that the plugin "failed to exit gracefully".
// The host must not Kill these clients itself.
package goplugin
