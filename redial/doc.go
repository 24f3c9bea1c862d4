// Package redial keeps a gRPC connection to a plugin process usable across
// the plugin's death: it holds the current *grpc.ClientConn, starts a fresh
// plugin through a [Respawner] when asked, and swaps the new connection in
// atomically.
//
// # Connections and generations
//
// A [Conn] implements grpc.ClientConnInterface, so a generated stub binds to
// it once and keeps working across respawns. Each plugin instance is a
// [Generation] with a number that grows by one per respawn. A call that
// reaches a connection the Conn has retired is routed to the current one:
// by the call policy (package interceptor, see [Handle.Route]) or, without
// one, by the Conn itself, which then retries nothing.
//
// A [Policy] acts on its Conn through a [Handle], as a grpc-go balancer acts
// through a balancer.ClientConn: the Handle holds what is about the Conn as
// a whole (the current generation, routing, replacing, events, closing, a
// goroutine of the Conn's), and a Generation the verbs about its one plugin
// ([Generation.Condemn], [Generation.KillHung], [Generation.MarkServed])
// and its ledger file ([Generation.Ledger]). The policy's [Binding] says
// what every connection carries and whether the Conn keeps ledgers.
//
// # Respawning
//
// A policy asks for the generation that replaces a failed one with
// [Handle].Replace; a plugin whose process exits is replaced without
// asking. Only one
// respawn runs per generation, however many callers ask, and it runs detached
// from any caller's context, under the Conn's own timeout, so a caller that
// gives up does not abort it for the others. A hook that fails, panics or
// hangs past the timeout makes the respawn fail with an error; it never takes
// the Conn down. The first respawn after a plugin that served calls is
// immediate; failed launches back off, and after 5 launches in a row that
// yield no plugin serving a call the crash-loop breaker opens: calls fail
// fast with an error matching [ErrCrashLoop] until the cool-down ends or [Conn.Reset] is
// called. Whatever the plugin does, launches are bounded to 10 a second
// (Pacing.LaunchRate). A failure no launch can cure ([Permanent], or an exit
// code given to Pacing.FinalExitCodes) stops launching: calls fail at once
// with an error matching [ErrPermanent].
//
// Death is pushed: when a generation's process exits, the Conn condemns it
// at once, whether or not anything is calling: it reports the exit, starts
// the respawn and closes the dead connection, so that calls queued on it
// (WaitForReady) are released. [Generation.Gone] tells a caller that the
// current plugin is known dead, so that it waits for the successor rather
// than send it a call.
//
// The replaced connection stays open for a grace period so that calls in
// flight on a live plugin can finish, then it is closed and its plugin
// stopped through [Backend.Stop]; the grace ends early when the process has
// exited.
//
// # Faster than a launch
//
// [Conn.Rotate] replaces a healthy plugin (an upgrade, a config reload):
// the new one is swapped in, calls in flight finish on the old one, which
// is then stopped gracefully and reported as retired. Pacing.Spares keeps
// spare plugins launched and ready, so that a death is answered by an
// atomic swap rather than a launch. Pacing.Recycle rotates a plugin after a
// number of calls, an age or a resident-memory watermark, before a leak
// gets it killed.
//
// # Hooks
//
// A hook is a [Respawner]. Package command's Hook
// ([github.com/grpc-respawn/respawn/redial/command.Hook]) execs a plugin
// binary which prints its address on stdout; package goplugin's
// ([github.com/grpc-respawn/respawn/redial/goplugin.Hook]) launches a
// hashicorp/go-plugin client. A hook of one's own returns a [Backend]: a
// Target or a Conn, a Stop, and optionally the plugin's [Process]
// ([NewProcess]).
//
// # Observing
//
// [WithEventHandler] receives an [Event] for each exit (with its
// [Exit.Reason]: a crash, or a stop redial made), respawn, retry and breaker
// change, delivered asynchronously so that a slow or panicking handler
// cannot hurt calls, respawns or [Conn.Close]; [Conn.Stats] returns counters
// for metrics.
package redial
