package interceptor

import (
	"context"
	"strings"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/selector"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/stats"

	"github.com/grpc-respawn/respawn/internal/ownrpc"
)

// HostRPCs matches the host's own calls and none of respawn's: not the
// health and readiness probes respawn sends to its plugins (marked in their
// context), nor the RPCs of go-plugin's own services (plugin.GRPCController,
// plugin.GRPCBroker, plugin.GRPCStdio: its Shutdown, broker and stdio
// streams). Both pass through the interceptors given to
// redial.WithDialOptions; wrap a logging, metrics or tracing interceptor in
// go-grpc-middleware v2's selector with it to leave them out:
//
//	selector.UnaryClientInterceptor(logging.UnaryClientInterceptor(l), interceptor.HostRPCs)
//	selector.StreamClientInterceptor(logging.StreamClientInterceptor(l), interceptor.HostRPCs)
//
// A grpc.health.v1 call the host makes itself is the host's, and matches.
// It is safe for concurrent use.
var HostRPCs selector.Matcher = selector.MatchFunc(hostRPC)

func hostRPC(ctx context.Context, m interceptors.CallMeta) bool {
	if ownrpc.In(ctx) {
		return false
	}
	// Only go-plugin's services start with "plugin.": build the full name
	// for those only.
	return !strings.HasPrefix(m.Service, "plugin.") || !ownrpc.GoPlugin(m.FullMethod())
}

// IsHostRPC is [HostRPCs] for a stats handler's filter, such as otelgrpc's
// (otelgrpc.WithFilter(interceptor.IsHostRPC)): it reports false for the
// RPCs of go-plugin's own services and for every grpc.health.v1
// Health/Check. A filter is given the method's name but not the call's
// context, so it cannot tell respawn's probes from a Check the host sends
// itself: it leaves out both. It is safe for concurrent use.
func IsHostRPC(info *stats.RPCTagInfo) bool {
	m := info.FullMethodName
	return m != healthpb.Health_Check_FullMethodName && !ownrpc.GoPlugin(m)
}
