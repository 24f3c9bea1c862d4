// Package eventlog writes redial's events to a go-grpc-middleware v2
// [logging.Logger], so that the adapters a host already uses for its call
// logs (mw's zap, zerolog, logrus, slog, logr and go-kit providers, or a
// [logging.LoggerFunc]) log respawn's story too, with the same field names.
//
// Pass [Handler] to redial.WithEventHandler:
//
//	conn, err := redial.New(hook,
//		redial.WithName("objectstore"),
//		redial.WithEventHandler(eventlog.Handler(logger)))
//
// # Fields
//
// A line carries the fields of [redial.Event.LogValue], each name prefixed
// with "respawn." — the same names and values log/slog prints for an Event
// logged as slog.Any("respawn", e):
//
//   - respawn.event, the [redial.EventKind]'s name, and respawn.generation,
//     on every line; respawn.plugin when the Conn has a name
//     (redial.WithName);
//   - respawn.method (the full method name) and respawn.attempt, for an
//     event about a call (a retry, an outcome unknown);
//   - respawn.pid, respawn.reason (redial.Exit.Reason) and either
//     respawn.exit_code or respawn.signal with respawn.signal_name, and
//     respawn.oom_killed (true) when the kernel counted an OOM kill, for an
//     exit and a spare discarded after it died; respawn.pid alone for a
//     spare ready;
//   - respawn.duration_ms, for a finished respawn and any event that took
//     time;
//   - respawn.planned (true) for a planned replacement's respawn, and
//     respawn.spare (true) for a respawn that promoted a spare;
//   - respawn.error, for an event with an error.
//
// An event about a call also carries mw's grpc.component ("client"),
// grpc.service and grpc.method, as mw's logging interceptor fills them from
// [interceptors.NewClientCallMeta]. eventlog sets no grpc.method_type, as an
// event does not say whether the call was a stream; with mw's logging
// interceptor outside respawn, it comes from the call's ctx: fields that
// mw's logging interceptor put in the call's ctx ([logging.InjectFields]:
// request and trace ids) follow.
//
// # Levels
//
//   - an exit nobody in this host asked for (redial.ExitCrashed: a crash,
//     an OOM kill, a signal from outside) warns; an exit redial caused
//     (retired, hung-killed, launch abandoned, closed) is info;
//   - a respawn that starts or succeeds is info, one that fails warns;
//   - a retry is info; an outcome unknown warns; a plugin found hung warns;
//   - the crash-loop breaker opening is an error, its closing info;
//   - a rotation or recycling ([redial.Conn.Rotate], redial.Pacing.Recycle), a
//     spare ready or promoted is info; a spare discarded without serving
//     warns;
//   - the Conn closed (redial.EventClosed, the last line) is info, or warns
//     when a plugin's stop failed.
//
// # Context
//
// A line is logged with the event's Context (the call's ctx, for retries and
// outcomes unknown) when it has one, else with context.Background(), so a
// logger that reads trace ids from the ctx finds them.
package eventlog
