// Package health notices that a plugin has died or hung before a caller
// does, and has package redial replace it early, so the next call finds a
// live plugin instead of paying for the respawn itself.
//
// # Sources
//
// respawn.New watches every Conn it makes, with the [Config] given to
// respawn.WithHealth; the zero Config is the defaults (probe every 1s, 1s
// timeout, 3 failures):
//
//	rc, err := respawn.New(hook, respawn.WithHealth(health.Config{Interval: 500 * time.Millisecond}))
//
// The watch runs until the Conn's Close, which stops it before it stops
// the plugin. A policy of a host's own starts one with [Watch] on the
// redial.Handle it is given. The watcher follows the
// generations of the Conn. For the current one it adds two sources to the
// one redial has itself (a process exit, which redial pushes: it respawns
// the plugin as soon as the kernel reaps it):
//
//   - Connection state. A connection that goes TRANSIENT_FAILURE, or leaves
//     READY for IDLE or CONNECTING, is confirmed with a grpc.health.v1 Check
//     given one round ([Config.Timeout]) to answer. IDLE alone is not death: grpc-go also goes IDLE
//     after its idle timeout. A check that cannot reach the plugin
//     (codes.Unavailable) respawns it; any answer means it is alive. The check
//     reconnects an idle connection, which is the price of knowing.
//   - A periodic probe, every [Config.Interval], catches what the other two
//     cannot see: a plugin that is stopped (SIGSTOP), deadlocked or spinning
//     keeps its process and its socket, so neither exit nor state changes.
//     A probe's check carries no deadline and stays open until the plugin
//     answers: each [Config.Timeout] it goes unanswered is a failed round,
//     and an answer that comes later, from a slow plugin or read late by a
//     busy host, still counts. A check that finds no connection fails at
//     once. On a failed round the watcher asks the kernel about the
//     process (below). Once the plugin is hung, the watcher emits
//     redial.EventHung with a "health: plugin hung" cause, asks for the
//     respawn and kills the process.
//
// # Hung, or only slow
//
// A failed round says only that no answer came in time. On Linux, where
// the process is known (redial.Generation.Process), the watcher judges the
// processes that serve the plugin: those holding its listening socket,
// found once, at the first round after the plugin becomes current (not
// during the recovery that made it current, whose CPUs the search would
// take). That is the process the hook
// started, or, for a plugin launched behind a shell (sh -c, as go-plugin's
// examples do), the shell's child that serves, not the shell that waits for
// it; when none is found, the process the hook started. The watcher reads
// their /proc/<pid>/stat at the middle and the end of each failed round,
// before the check is cancelled, so that neither the plugin's reading of
// the check nor the end of the check counts as a sign of life:
//
//   - State T, stopped by a signal: hung at this first failed round. With
//     the defaults (interval 1s, timeout 1s) a stopped plugin is found at
//     most 2s after it stopped, and replaced within 3s.
//   - A thread runnable (state R: waiting for a CPU) at the end of the
//     round, or CPU time used in its last half: slow, not hung; the round
//     does not count. A busy plugin on a host whose cores are all saturated
//     is not killed for answering late.
//   - The watcher itself woke at the end of the round more than a tenth of
//     [Config.Timeout] late: the host's own goroutines wait for CPUs, and
//     an answer may be waiting to be read. No evidence against the plugin;
//     the round does not count.
//   - Otherwise, no sign of life: hung after [Config.Failures] such rounds
//     in a row, at most interval + failures × max(interval, timeout) after it
//     stopped answering: 4s with the defaults, for a deadlocked plugin
//     (handlers blocked, transport alive) as for any other that sleeps
//     without answering.
//
// A plugin whose rounds fail for 10 × [Config.Failures] in a row, slow or
// judged while the host was late, is hung all the same (30s).
//
// Elsewhere, or for a hook that knows no process, every failed round counts
// and a plugin is hung after [Config.Failures] of them in a row (4s), stopped
// or busy alike: keep [Config.Timeout] above the plugin's worst answer time
// under load.
//
// Respawns are single flight per generation inside redial, so a death seen
// by the watcher and by a failing call at the same moment is one respawn. If
// the respawn fails, or the crash-loop breaker is open, the watcher asks
// again every interval while the condemned plugin is still current; redial's
// backoff and breaker decide what actually runs.
//
// # What counts as alive
//
// Any answer from the plugin: SERVING, NOT_SERVING, codes.NotFound for a
// service name it does not know, codes.Unimplemented from a plugin that
// serves no health service at all. The watcher judges liveness, not
// readiness; a plugin that says NOT_SERVING is left alone. Only codes.DeadlineExceeded, codes.Unavailable and
// codes.Canceled are failures.
//
// The default service name is "", the server's overall health: grpc-go's
// health.NewServer reports it SERVING from the start, and hashicorp/go-plugin
// uses that server, so it works for both. A plugin author who does not use
// go-plugin needs one line, healthpb.RegisterHealthServer(s,
// health.NewServer()) with grpc-go's health package, which is why this
// package offers no server helper.
//
// # Health is not a served call
//
// A successful check does not call redial.Generation.MarkServed. That mark
// is what resets the crash-loop breaker, and it must mean "this plugin did
// real work": a plugin that answers health checks but crashes on every real
// call would otherwise never trip the breaker, and the host would respawn it
// forever.
//
// # Probes and the call policy
//
// Checks go to the generation's own *grpc.ClientConn, not through the Conn:
// a check of plugin 3 must never be answered by plugin 4. The interceptors
// of package interceptor pass /grpc.health.v1.Health/ methods through
// untouched, so a failed check is never retried nor taken for a dead plugin
// by the call policy; the watcher alone decides.
//
// Each check's context is marked as one of respawn's own RPCs, for the
// filters that keep them out of the host's telemetry: the host's
// interceptors and stats handler also run on a plugin's own connection.
//
// The probe is an RPC, so it resets grpc-go's idle timer: with an interval
// shorter than the idle timeout, the connection never goes idle.
package health
