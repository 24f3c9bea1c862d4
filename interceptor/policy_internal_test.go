package interceptor

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grpc-respawn/respawn/internal/testplugin"
	"github.com/grpc-respawn/respawn/redial"
)

// TestExitBlamesOnlyCancellation: a process exit that lands after an attempt
// failed on its own must not relabel that failure.
func TestExitBlamesOnlyCancellation(t *testing.T) {
	exited, cancel := context.WithCancelCause(context.Background())
	cancel(errProcessExited)
	alive, stop := context.WithCancel(context.Background())
	defer stop()
	tests := []struct {
		name      string
		actx      context.Context
		err       error
		reached   bool
		wantClass Class
		wantCode  codes.Code
	}{
		{"cancelled by the exit, never sent", exited, status.Error(codes.Canceled, "context canceled"), false, NeverSent, codes.Unavailable},
		{"cancelled by the exit, reached", exited, status.Error(codes.Canceled, "context canceled"), true, MaybeProcessed, codes.Unavailable},
		{"handler error, then the exit", exited, status.Error(codes.Unavailable, "bucket is read-only"), true, NotConnectionFault, codes.Unavailable},
		{"handler NotFound, then the exit", exited, status.Error(codes.NotFound, "no such key"), true, NotConnectionFault, codes.NotFound},
		{"plugin died, then the exit", exited, status.Error(codes.Unavailable, "error reading from server: EOF"), true, MaybeProcessed, codes.Unavailable},
		{"cancelled, process alive", alive, status.Error(codes.Canceled, "context canceled"), true, NotConnectionFault, codes.Canceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			class, got := attemptFailed(ctx, tt.actx, tt.err, tt.reached)
			if class != tt.wantClass {
				t.Errorf("class = %v, want %v", class, tt.wantClass)
			}
			if status.Code(got) != tt.wantCode {
				t.Errorf("error = %v, want code %v", got, tt.wantCode)
			}
			if tt.wantClass == NotConnectionFault && got != tt.err {
				t.Errorf("error = %v, want the attempt's own error %v", got, tt.err)
			}
		})
	}
}

// TestDrainingKeepsThePlugin: a GOAWAY from a live plugin is retried on the
// same generation, counts as an attempt and respawns nothing; any other
// never-sent failure replaces the generation.
func TestDrainingKeepsThePlugin(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "s.sock")
	lis, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	testplugin.Register(srv, testplugin.New(""))
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()
	hook := redial.RespawnerFunc(func(context.Context, redial.Request) (redial.Backend, error) {
		return redial.Backend{Target: "unix://" + sock}, nil
	})
	var p Policy // the zero Policy: the defaults
	rc, err := redial.New(hook, redial.WithPolicy(&p))
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := rc.Connect(ctx); err != nil {
		t.Fatal(err)
	}

	drained := status.Error(codes.Unavailable, "the stream is rejected because server is draining the connection")
	r := &retrier{p: &p, c: rc, method: "/m", attempt: 1}
	g := rc.Current()
	for want := 2; want <= defaultMaxAttempts; want++ {
		ng, err := r.next(ctx, g, drained, NeverSent)
		if err != nil || ng != g {
			t.Fatalf("attempt %d after a GOAWAY: got generation %v, %v; want the same one", want, ng, err)
		}
		if r.attempt != want {
			t.Errorf("attempt = %d, want %d", r.attempt, want)
		}
	}
	if _, err := r.next(ctx, g, drained, NeverSent); !errors.Is(err, drained) {
		t.Errorf("after %d attempts: got %v, want the GOAWAY's error", defaultMaxAttempts, err)
	}
	if n := rc.Stats().Respawns; n != 0 {
		t.Errorf("respawns after GOAWAYs = %d, want 0", n)
	}

	refused := status.Error(codes.Unavailable, `connection error: desc = "transport: Error while dialing: dial unix `+sock+`: connect: connection refused"`)
	r = &retrier{p: &p, c: rc, method: "/m", attempt: 1}
	ng, err := r.next(ctx, g, refused, NeverSent)
	if err != nil || ng == g {
		t.Fatalf("after a refused dial: got generation %v, %v; want a new one", ng, err)
	}
	if n := rc.Stats().Respawns; n != 1 {
		t.Errorf("respawns after a refused dial = %d, want 1", n)
	}
}
