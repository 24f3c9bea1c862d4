package eventlog_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/logging"

	"github.com/grpc-respawn/respawn/redial"
	"github.com/grpc-respawn/respawn/redial/eventlog"
)

// line is what one Log call received.
type line struct {
	ctx    context.Context
	level  logging.Level
	msg    string
	fields map[string]any
}

func capture(e redial.Event) (got []line) {
	l := logging.LoggerFunc(func(ctx context.Context, level logging.Level, msg string, fields ...any) {
		m := make(map[string]any)
		for i := 0; i+1 < len(fields); i += 2 {
			k, _ := fields[i].(string)
			if _, dup := m[k]; dup {
				k = "DUPLICATE " + k
			}
			m[k] = fields[i+1]
		}
		got = append(got, line{ctx, level, msg, m})
	})
	eventlog.Handler(l)(e)
	return got
}

type ctxKey struct{}

func TestHandler(t *testing.T) {
	errDied := errors.New("plugin died")
	callCtx := context.WithValue(context.Background(), ctxKey{}, "call")
	callCtx = logging.InjectFields(callCtx, logging.Fields{"trace_id", "abc"})
	const method = "/velero.ObjectStore/PutObject"
	tests := []struct {
		name   string
		event  redial.Event
		level  logging.Level
		msg    string         // the message, if given
		want   map[string]any // fields that must be there, with these values
		absent []string       // fields that must not be there
	}{
		{
			name:   "a crash warns and names the signal",
			event:  redial.Event{Kind: redial.EventExit, Plugin: "objectstore", Generation: 3, Exit: redial.Exit{PID: 42, Code: -1, Signal: syscall.SIGKILL, Reason: redial.ExitCrashed}},
			level:  logging.LevelWarn,
			want:   map[string]any{"respawn.event": "exit", "respawn.plugin": "objectstore", "respawn.generation": uint64(3), "respawn.pid": int64(42), "respawn.signal": int64(9), "respawn.signal_name": syscall.SIGKILL.String(), "respawn.reason": "crashed"},
			absent: []string{"respawn.exit_code", "grpc.method", "respawn.error", "respawn.duration_ms"},
		},
		{
			name:   "an exit by itself with a code warns and names the code",
			event:  redial.Event{Kind: redial.EventExit, Generation: 1, Exit: redial.Exit{PID: 7, Code: 2, Reason: redial.ExitCrashed}},
			level:  logging.LevelWarn,
			want:   map[string]any{"respawn.pid": int64(7), "respawn.exit_code": int64(2), "respawn.reason": "crashed"},
			absent: []string{"respawn.signal", "respawn.plugin"},
		},
		{
			name:  "a retired plugin is info",
			event: redial.Event{Kind: redial.EventExit, Generation: 1, Exit: redial.Exit{PID: 7, Code: -1, Signal: syscall.SIGTERM, Reason: redial.ExitRetired}},
			level: logging.LevelInfo,
			want:  map[string]any{"respawn.reason": "retired", "respawn.signal": int64(syscall.SIGTERM)},
		},
		{
			name:  "a plugin killed because it hung is info: redial caused it",
			event: redial.Event{Kind: redial.EventExit, Exit: redial.Exit{Signal: syscall.SIGKILL, Reason: redial.ExitHungKilled}},
			level: logging.LevelInfo,
			want:  map[string]any{"respawn.reason": "hung-killed"},
		},
		{
			name:  "a closed plugin is info",
			event: redial.Event{Kind: redial.EventExit, Exit: redial.Exit{Reason: redial.ExitClosed}},
			level: logging.LevelInfo,
			want:  map[string]any{"respawn.reason": "closed", "respawn.exit_code": int64(0)},
		},
		{
			name:  "a respawn start is info with its cause",
			event: redial.Event{Kind: redial.EventRespawnStart, Generation: 2, Err: errDied},
			level: logging.LevelInfo,
			want:  map[string]any{"respawn.event": "respawn-start", "respawn.error": errDied},
		},
		{
			name:   "a respawn done is info with its duration",
			event:  redial.Event{Kind: redial.EventRespawnDone, Generation: 2, Duration: 1500 * time.Microsecond},
			level:  logging.LevelInfo,
			want:   map[string]any{"respawn.event": "respawn-done", "respawn.generation": uint64(2), "respawn.duration_ms": 1.5},
			absent: []string{"respawn.error", "respawn.pid"},
		},
		{
			name:  "a failed respawn warns",
			event: redial.Event{Kind: redial.EventRespawnDone, Generation: 1, Duration: time.Second, Err: errDied},
			level: logging.LevelWarn,
			want:  map[string]any{"respawn.duration_ms": 1000.0, "respawn.error": errDied},
		},
		{
			name:  "a retry is info with mw's call fields, the attempt and the ctx's fields",
			event: redial.Event{Kind: redial.EventRetry, Generation: 2, Method: method, Attempt: 2, Err: errDied, Context: callCtx},
			level: logging.LevelInfo,
			want:  map[string]any{"grpc.component": "client", "grpc.service": "velero.ObjectStore", "grpc.method": "PutObject", "respawn.attempt": int64(2), "respawn.error": errDied, "trace_id": "abc"},
		},
		{
			name:  "an outcome unknown warns",
			event: redial.Event{Kind: redial.EventOutcomeUnknown, Method: method, Attempt: 1, Err: errDied, Context: callCtx},
			level: logging.LevelWarn,
			want:  map[string]any{"respawn.event": "outcome-unknown", "grpc.method": "PutObject", "respawn.attempt": int64(1)},
		},
		{
			name:  "a breaker opening is an error",
			event: redial.Event{Kind: redial.EventBreaker, Err: errDied},
			level: logging.LevelError,
			msg:   "crash-loop breaker opened",
			want:  map[string]any{"respawn.event": "breaker", "respawn.error": errDied},
		},
		{
			name:   "a breaker closing is info",
			event:  redial.Event{Kind: redial.EventBreaker},
			level:  logging.LevelInfo,
			msg:    "crash-loop breaker closed",
			want:   map[string]any{"respawn.event": "breaker"},
			absent: []string{"respawn.error"},
		},
		{
			name:  "the first launch is no respawn",
			event: redial.Event{Kind: redial.EventRespawnStart, Generation: 1},
			level: logging.LevelInfo,
			msg:   "plugin starting",
		},
		{
			name:   "a rotation is info",
			event:  redial.Event{Kind: redial.EventRespawnDone, Generation: 3, Duration: time.Millisecond, Planned: true},
			level:  logging.LevelInfo,
			msg:    "plugin rotated",
			want:   map[string]any{"respawn.event": "respawn-done", "respawn.planned": true, "respawn.duration_ms": 1.0},
			absent: []string{"respawn.spare"},
		},
		{
			name:  "recycling is info with its reason",
			event: redial.Event{Kind: redial.EventRespawnStart, Generation: 3, Err: errDied, Planned: true},
			level: logging.LevelInfo,
			msg:   "plugin recycling",
			want:  map[string]any{"respawn.planned": true, "respawn.error": errDied},
		},
		{
			name:  "a rotation that starts is info",
			event: redial.Event{Kind: redial.EventRespawnStart, Generation: 3, Planned: true},
			level: logging.LevelInfo,
			msg:   "plugin rotating",
		},
		{
			name:   "a spare promoted is info",
			event:  redial.Event{Kind: redial.EventRespawnDone, Generation: 2, Spare: true},
			level:  logging.LevelInfo,
			msg:    "spare promoted",
			want:   map[string]any{"respawn.event": "respawn-done", "respawn.spare": true},
			absent: []string{"respawn.planned"},
		},
		{
			name:  "a spare that died warns, with its exit",
			event: redial.Event{Kind: redial.EventStandby, Err: errDied, Exit: redial.Exit{PID: 9, Code: -1, Signal: syscall.SIGKILL, Reason: redial.ExitCrashed}},
			level: logging.LevelWarn,
			msg:   "spare discarded without serving",
			want:  map[string]any{"respawn.event": "standby", "respawn.pid": int64(9), "respawn.signal": int64(9), "respawn.reason": "crashed", "respawn.error": errDied},
		},
		{
			name:   "a spare that never came up warns, without an exit",
			event:  redial.Event{Kind: redial.EventStandby, Err: errDied},
			level:  logging.LevelWarn,
			absent: []string{"respawn.pid", "respawn.reason"},
		},
		{
			name:   "a spare ready is info with its pid",
			event:  redial.Event{Kind: redial.EventStandby, Exit: redial.Exit{PID: 11}},
			level:  logging.LevelInfo,
			msg:    "spare ready",
			want:   map[string]any{"respawn.pid": int64(11)},
			absent: []string{"respawn.reason", "respawn.exit_code", "respawn.error"},
		},
		{
			name:  "a hung plugin warns",
			event: redial.Event{Kind: redial.EventHung, Generation: 4},
			level: logging.LevelWarn,
			want:  map[string]any{"respawn.event": "hung", "respawn.generation": uint64(4)},
		},
		{
			name:  "the Conn closed is info",
			event: redial.Event{Kind: redial.EventClosed, Generation: 3},
			level: logging.LevelInfo,
			msg:   "closed",
			want:  map[string]any{"respawn.event": "closed", "respawn.generation": uint64(3)},
		},
		{
			name:  "a Close whose stop failed warns, with the error",
			event: redial.Event{Kind: redial.EventClosed, Err: errDied},
			level: logging.LevelWarn,
			want:  map[string]any{"respawn.error": errDied},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := capture(tt.event)
			if len(got) != 1 {
				t.Fatalf("got %d lines, want 1", len(got))
			}
			l := got[0]
			if l.level != tt.level {
				t.Errorf("level = %v, want %v", l.level, tt.level)
			}
			if l.msg == "" || tt.msg != "" && l.msg != tt.msg {
				t.Errorf("message %q, want %q", l.msg, tt.msg)
			}
			for k, want := range tt.want {
				if v, ok := l.fields[k]; !ok || v != want {
					t.Errorf("field %s = %#v (present %v), want %#v", k, v, ok, want)
				}
			}
			for _, k := range tt.absent {
				if v, ok := l.fields[k]; ok {
					t.Errorf("field %s = %#v, want none", k, v)
				}
			}
			for k := range l.fields {
				if len(k) > 10 && k[:10] == "DUPLICATE " {
					t.Errorf("field %s twice", k[10:])
				}
			}
			wantCtx := tt.event.Context
			if wantCtx == nil {
				wantCtx = context.Background()
			}
			if l.ctx != wantCtx {
				t.Errorf("logged with ctx %v, want %v", l.ctx, wantCtx)
			}
		})
	}
}

// TestHandlerNilLogger: a nil logger is no logger, not a panic.
func TestHandlerNilLogger(t *testing.T) {
	eventlog.Handler(nil)(redial.Event{Kind: redial.EventExit})
}

// TestFieldsAreEvenKeyValues: every key is a string, for every kind and
// for one that is none.
func TestFieldsAreEvenKeyValues(t *testing.T) {
	for _, k := range append(kinds(), "not-a-kind") {
		f := eventlog.Fields(redial.Event{Kind: k, Method: "/s/m", Duration: 1, Err: errors.New("x"), Context: context.Background()})
		if len(f)%2 != 0 {
			t.Fatalf("%v: %d fields, want an even number", k, len(f))
		}
		for i := 0; i < len(f); i += 2 {
			if _, ok := f[i].(string); !ok {
				t.Errorf("%v: key %d is %T, want string", k, i/2, f[i])
			}
		}
		if got := fmt.Sprint(f[1]); got != string(k) {
			t.Errorf("%v: respawn.event = %s", k, got)
		}
	}
}

// TestFieldsAreLogValue: for every kind, eventlog's respawn.* fields are
// redial.Event.LogValue's, in its order and with its values, so that slog
// prints an Event logged as slog.Any("respawn", e) as eventlog logs it; the
// other fields are mw's call fields and those of the call's ctx.
func TestFieldsAreLogValue(t *testing.T) {
	ctx := logging.InjectFields(context.Background(), logging.Fields{"trace_id", "abc"})
	variants := []redial.Event{
		{},
		{Plugin: "objectstore", Generation: 3, Duration: 1500 * time.Microsecond, Err: errors.New("x")},
		{Generation: 2, Method: "/pkg.S/M", Attempt: 2, Err: errors.New("x"), Context: ctx},
		{Generation: 1, Exit: redial.Exit{PID: 42, Code: -1, Signal: syscall.SIGKILL, Reason: redial.ExitRetired}},
		{Exit: redial.Exit{PID: 7, Code: 2}, Err: errors.New("died")},
		{Generation: 4, Planned: true, Spare: true, Duration: time.Second},
	}
	others := map[string]bool{logging.ComponentFieldKey: true, logging.ServiceFieldKey: true, logging.MethodFieldKey: true, "trace_id": true}
	for _, k := range kinds() {
		for i, e := range variants {
			e.Kind = k
			attrs := e.LogValue().Group()
			f := eventlog.Fields(e)
			n := 0
			for j := 0; j+1 < len(f); j += 2 {
				key := f[j].(string)
				name, ok := strings.CutPrefix(key, "respawn.")
				switch {
				case !ok && !others[key]:
					t.Errorf("%v/%d: field %s is neither LogValue's nor mw's", k, i, key)
				case !ok:
				case n >= len(attrs) || attrs[n].Key != name || !reflect.DeepEqual(attrs[n].Value.Any(), f[j+1]):
					t.Errorf("%v/%d: field %d is %s=%v, LogValue's are %v", k, i, n, key, f[j+1], attrs)
					n = len(attrs)
				default:
					n++
				}
			}
			if n != len(attrs) {
				t.Errorf("%v/%d: eventlog has %d of LogValue's %d fields: %v, want %v", k, i, n, len(attrs), f, attrs)
			}
			if e.Method != "" {
				continue
			}
			viaSlog, viaEventlog := &strings.Builder{}, &strings.Builder{}
			slog.New(slog.NewTextHandler(viaSlog, nil)).LogAttrs(context.Background(), slog.LevelInfo, "m", slog.Any("respawn", e))
			slog.New(slog.NewTextHandler(viaEventlog, nil)).Info("m", f...)
			if got, want := trimTime(viaEventlog.String()), trimTime(viaSlog.String()); got != want {
				t.Errorf("%v/%d: eventlog prints\n%s, slog.Any(\"respawn\", e)\n%s", k, i, got, want)
			}
		}
	}
}

// trimTime drops a text handler's time field, the one that differs.
func trimTime(line string) string {
	_, rest, _ := strings.Cut(line, " ")
	return rest
}

// kinds returns every EventKind.
func kinds() []redial.EventKind {
	return []redial.EventKind{redial.EventExit, redial.EventRespawnStart, redial.EventRespawnDone, redial.EventRetry,
		redial.EventOutcomeUnknown, redial.EventBreaker, redial.EventHung, redial.EventStandby}
}
