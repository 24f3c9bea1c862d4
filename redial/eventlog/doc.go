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
// Every line carries respawn.event (the [redial.EventKind]'s name) and
// respawn.generation, and respawn.plugin when the Conn has a name
// (redial.WithName). An event about a call (a retry, an outcome unknown)
// carries mw's grpc.component ("client"), grpc.service and grpc.method, as
// mw's logging interceptor fills them from [interceptors.NewClientCallMeta],
// and respawn.attempt. eventlog sets no grpc.method_type, as an event does
// not say whether the call was a stream; with mw's logging interceptor
// outside respawn, it comes from the call's ctx (below). An exit, and a
// spare discarded after it died, carries respawn.pid, respawn.reason and
// either respawn.exit_code or respawn.signal with respawn.signal_name; a
// spare ready carries its respawn.pid; a
// finished respawn carries respawn.duration_ms; an event with an error
// carries it as error. Fields that mw's logging interceptor put in the
// call's ctx ([logging.InjectFields]: request and trace ids) follow.
//
// # Levels
//
//   - an exit nobody in this host asked for (Reason "crashed": a crash,
//     an OOM kill, a signal from outside) warns; an exit redial caused
//     (retired, hung-killed, launch abandoned, closed) is info;
//   - a respawn that starts or succeeds is info, one that fails warns;
//   - a retry is info; an outcome unknown warns; a plugin found hung warns;
//   - the crash-loop breaker opening is an error, its closing info;
//   - a rotation or recycling ([redial.Conn.Rotate], redial.WithRecycle), a
//     spare ready or promoted is info; no spare ready when one was needed,
//     and a spare discarded without serving, warn.
//
// # Context
//
// A line is logged with the event's Context (the call's ctx, for retries and
// outcomes unknown) when it has one, else with context.Background(), so a
// logger that reads trace ids from the ctx finds them.
package eventlog
