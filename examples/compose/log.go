//go:build unix

package main

import (
	"context"
	"io"
	"log/slog"
	"sync"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/logging"
)

// slogLogger adapts a *slog.Logger to go-grpc-middleware's logging.Logger,
// as mw's own slog example does; its levels are slog's.
func slogLogger(l *slog.Logger) logging.Logger {
	return logging.LoggerFunc(func(ctx context.Context, level logging.Level, msg string, fields ...any) {
		l.Log(ctx, slog.Level(level), msg, fields...)
	})
}

// newSlog returns a text logger to out at debug level, the level of mw
// logging's lines for calls that succeed, without timestamps and deadlines,
// which the example's output reads better without. out must be safe for concurrent
// use.
func newSlog(out io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(out, &slog.HandlerOptions{
		Level: slog.LevelDebug,
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			switch a.Key {
			case slog.TimeKey, "grpc.start_time", "grpc.request.deadline", "protocol", "grpc.component":
				return slog.Attr{}
			}
			return a
		},
	}))
}

// lockedWriter serialises writes to w: calls and redial's event handler log
// from different goroutines, and the example prints to the same output.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
