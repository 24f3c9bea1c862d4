package eventlog_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"syscall"
	"time"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/logging"

	"github.com/grpc-respawn/respawn/redial"
	"github.com/grpc-respawn/respawn/redial/eventlog"
)

// The story of one crash, as a handler given to redial.WithEventHandler
// sees it, logged through a logging.LoggerFunc.
func ExampleHandler() {
	logger := logging.LoggerFunc(func(_ context.Context, level logging.Level, msg string, fields ...any) {
		fmt.Printf("%v %s", slog.Level(level), msg)
		for i := 0; i+1 < len(fields); i += 2 {
			fmt.Printf(" %v=%v", fields[i], fields[i+1])
		}
		fmt.Println()
	})
	handle := eventlog.Handler(logger)
	// With a Conn: redial.New(hook, redial.WithName("objectstore"),
	// redial.WithEventHandler(handle)). Here, the events it would deliver.
	died := errors.New("rpc error: code = Unavailable desc = connection refused")
	for _, e := range []redial.Event{
		{Kind: redial.EventExit, Plugin: "objectstore", Generation: 1, Exit: redial.Exit{PID: 4242, Code: -1, Signal: syscall.SIGKILL, Reason: redial.ExitCrashed}},
		{Kind: redial.EventRespawnStart, Plugin: "objectstore", Generation: 2, Err: died},
		{Kind: redial.EventRespawnDone, Plugin: "objectstore", Generation: 2, Duration: 12500 * time.Microsecond},
		{Kind: redial.EventRetry, Plugin: "objectstore", Generation: 2, Method: "/velero.ObjectStore/GetObject", Attempt: 2, Err: died},
		{Kind: redial.EventExit, Plugin: "objectstore", Generation: 1, Exit: redial.Exit{PID: 4242, Code: -1, Signal: syscall.SIGKILL, Reason: redial.ExitRetired}},
	} {
		handle(e)
	}
	// Output:
	// WARN plugin exited unexpectedly respawn.event=exit respawn.plugin=objectstore respawn.generation=1 respawn.pid=4242 respawn.signal=9 respawn.signal_name=killed respawn.reason=crashed
	// INFO respawn started respawn.event=respawn-start respawn.plugin=objectstore respawn.generation=2 respawn.error=rpc error: code = Unavailable desc = connection refused
	// INFO respawn done respawn.event=respawn-done respawn.plugin=objectstore respawn.generation=2 respawn.duration_ms=12.5
	// INFO call retried respawn.event=retry respawn.plugin=objectstore respawn.generation=2 respawn.method=/velero.ObjectStore/GetObject respawn.attempt=2 respawn.error=rpc error: code = Unavailable desc = connection refused grpc.component=client grpc.service=velero.ObjectStore grpc.method=GetObject
	// INFO plugin stopped respawn.event=exit respawn.plugin=objectstore respawn.generation=1 respawn.pid=4242 respawn.signal=9 respawn.signal_name=killed respawn.reason=retired
}

// With log/slog, the adapter is the one mw's examples use: a
// logging.LoggerFunc that calls slog.Logger.Log. The same logger can go to
// mw's logging interceptors, so call lines and respawn lines share fields.
func ExampleHandler_slog() {
	sl := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{} // deterministic output
			}
			return a
		},
	}))
	logger := logging.LoggerFunc(func(ctx context.Context, level logging.Level, msg string, fields ...any) {
		sl.Log(ctx, slog.Level(level), msg, fields...)
	})
	handle := eventlog.Handler(logger)
	handle(redial.Event{Kind: redial.EventExit, Plugin: "snapshotter", Generation: 3, Exit: redial.Exit{PID: 99, Code: 2, Reason: redial.ExitCrashed}})
	handle(redial.Event{Kind: redial.EventBreaker, Plugin: "snapshotter", Generation: 7, Err: errors.New("redial: crash loop")})
	// Output:
	// level=WARN msg="plugin exited unexpectedly" respawn.event=exit respawn.plugin=snapshotter respawn.generation=3 respawn.pid=99 respawn.exit_code=2 respawn.reason=crashed
	// level=ERROR msg="crash-loop breaker opened" respawn.event=breaker respawn.plugin=snapshotter respawn.generation=7 respawn.error="redial: crash loop"
}
