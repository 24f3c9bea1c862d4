package interceptor_test

import (
	"context"
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grpc-respawn/respawn/interceptor"
	"github.com/grpc-respawn/respawn/redial"
)

// TestRetriable: a retry layer outside respawn retries Unavailable and
// ResourceExhausted, never one of respawn's verdicts nor a context error.
func TestRetriable(t *testing.T) {
	eof := status.Error(codes.Unavailable, "error reading from server: EOF")
	for _, tt := range []struct {
		name string
		err  error
		want bool
	}{
		{"a live plugin's Unavailable", status.Error(codes.Unavailable, "bucket is read-only"), true},
		{"ResourceExhausted", status.Error(codes.ResourceExhausted, "quota"), true},
		{"a transport's Unavailable", eof, true},
		{"ErrPluginGone", redial.ErrPluginGone, false},
		{"ErrPluginGone, wrapped", fmt.Errorf("stub: %w", redial.ErrPluginGone), false},
		{"outcome unknown", &interceptor.OutcomeUnknownError{Method: "/m", Err: eof}, false},
		{"poison request", &interceptor.PoisonRequestError{Method: "/m", Deaths: 2, Err: eof}, false},
		{"stream broken", &interceptor.StreamBrokenError{Method: "/m", Err: eof}, false},
		{"closed Conn", redial.ErrClosed, false},
		{"caller's deadline", context.DeadlineExceeded, false},
		{"NotFound", status.Error(codes.NotFound, "no such key"), false},
		{"nil", nil, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := interceptor.Retriable(tt.err); got != tt.want {
				t.Errorf("Retriable(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
	if got := status.Code(redial.ErrPluginGone); got != codes.Unavailable {
		t.Errorf("ErrPluginGone's code = %v, want Unavailable, as its doc says", got)
	}
}
