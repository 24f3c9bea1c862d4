package interceptor_test

import (
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grpc-respawn/respawn/internal/respawntest"
	"github.com/grpc-respawn/respawn/internal/testpb"
	"github.com/grpc-respawn/respawn/redial"
)

// TestHostServiceConfigKept: the policy's dial options come after the
// host's, so they must not carry a default service config of their own:
// it would replace the host's wholesale (here, its message size limit).
func TestHostServiceConfigKept(t *testing.T) {
	const sc = `{"methodConfig": [{"name": [{"service": "respawn.test.v1.Test"}], "maxResponseMessageBytes": 1}]}`
	h := newHost(t, nil, []redial.Option{redial.WithDialOptions(grpc.WithDefaultServiceConfig(sc))})
	_, err := h.client.Get(respawntest.Context(t, 10*time.Second), &testpb.GetRequest{Id: "x"})
	if status.Code(err) != codes.ResourceExhausted {
		t.Errorf("got %v, want ResourceExhausted: the host's service config was dropped", err)
	}
}
