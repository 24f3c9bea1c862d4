//go:build unix

package main

import (
	"context"
	"io"
	"log/slog"
	"sync"

	"github.com/grpc-respawn/respawn/redial"
)

// callIDKey is the ctx key of the demo's call ids.
type callIDKey struct{}

// withCallID returns ctx carrying the call id id, which the event log
// prints for the events about that call (a retry, an outcome unknown).
func withCallID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, callIDKey{}, id)
}

// eventLogger returns an event handler for redial.WithEventHandler that
// logs respawn's story with slog to out, as an operator would read it:
// which plugin (redial.WithName), why it ended (reason "crashed" with a
// signal: killed from outside, nobody in this host asked; "retired":
// replaced by redial), how long the respawn took, and which call was
// retried or was not. It closes logged with the last event,
// redial.EventClosed.
func eventLogger(out io.Writer, logged chan<- struct{}) func(redial.Event) {
	log := slog.New(slog.NewTextHandler(out, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{} // the demo's output reads better without
			}
			return a
		},
	}))
	return func(e redial.Event) {
		attrs := []any{"respawn", e} // redial.Event is a slog.LogValuer: respawn.event=…, as eventlog names them
		if e.Context != nil {
			if id, ok := e.Context.Value(callIDKey{}).(string); ok {
				attrs = append(attrs, "call", id)
			}
		}
		switch {
		case e.Kind == redial.EventClosed:
			close(logged)
		case e.Kind == redial.EventExit && e.Exit.Reason == redial.ExitCrashed:
			log.Warn("  ! plugin died; nobody in this host stopped it", attrs...)
		case e.Kind == redial.EventExit:
			log.Info("  - plugin stopped by redial", attrs...)
		case e.Kind == redial.EventRespawnDone && e.Err != nil:
			log.Warn("  ! respawn failed", attrs...)
		case e.Kind == redial.EventRespawnDone && e.Planned:
			log.Info("  + plugin replaced on purpose", attrs...)
		case e.Kind == redial.EventRespawnDone && e.Generation > 1:
			log.Info("  + new plugin serving", attrs...)
		case e.Kind == redial.EventRetry:
			log.Info("  ~ call retried on the new plugin", attrs...)
		case e.Kind == redial.EventOutcomeUnknown:
			log.Warn("  ! call not retried: it may have run", attrs...)
		}
	}
}

// lockedWriter serialises writes to w: the demo and the event handler,
// which redial runs on a goroutine of its own, write to the same output.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
