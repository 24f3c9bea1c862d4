package interceptor_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grpc-respawn/respawn/interceptor"
	"github.com/grpc-respawn/respawn/internal/respawntest"
	"github.com/grpc-respawn/respawn/redial"
)

// TestNoHandle: interceptors made without the Handle redial.WithPolicy
// gives fail every call with a clear error instead of panicking, and never
// call the invoker.
func TestNoHandle(t *testing.T) {
	invoked := false
	invoker := func(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error {
		invoked = true
		return nil
	}
	streamer := func(context.Context, *grpc.StreamDesc, *grpc.ClientConn, string, ...grpc.CallOption) (grpc.ClientStream, error) {
		invoked = true
		return nil, nil
	}
	ctx := respawntest.Context(t, 10*time.Second)
	p := interceptor.New()
	for name, h := range map[string]redial.Handle{"nil": nil} {
		for kind, err := range map[string]error{
			"unary":  p.UnaryClientInterceptor(h)(ctx, "/m", nil, nil, nil, invoker),
			"stream": second(p.StreamClientInterceptor(h)(ctx, &grpc.StreamDesc{}, nil, "/m", streamer)),
		} {
			if status.Code(err) != codes.FailedPrecondition {
				t.Errorf("%s Handle, %s: %v, want FailedPrecondition", name, kind, err)
			}
		}
	}
	if invoked {
		t.Error("a call went through interceptors without a Handle")
	}
}

func second(_ grpc.ClientStream, err error) error { return err }
