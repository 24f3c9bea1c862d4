// Package ownrpc marks the RPCs respawn and go-plugin make on their own —
// health probes, go-plugin's controller, broker and stdio streams — so that
// the filters a host gives its interceptors and stats handlers can leave
// them out of the host's telemetry.
package ownrpc

import (
	"context"
	"strings"
)

type key struct{}

// With returns ctx marked as carrying one of respawn's own RPCs.
func With(ctx context.Context) context.Context { return context.WithValue(ctx, key{}, true) }

// In reports whether ctx was marked by With.
func In(ctx context.Context) bool { v, _ := ctx.Value(key{}).(bool); return v }

// GoPlugin reports whether fullMethod is one of the services go-plugin
// serves in every plugin for its own use (plugin.GRPCController,
// plugin.GRPCBroker, plugin.GRPCStdio).
func GoPlugin(fullMethod string) bool {
	return strings.HasPrefix(fullMethod, "/plugin.GRPCController/") ||
		strings.HasPrefix(fullMethod, "/plugin.GRPCBroker/") ||
		strings.HasPrefix(fullMethod, "/plugin.GRPCStdio/")
}

// Instance reports whether fullMethod belongs to one plugin instance rather
// than to the plugin: go-plugin's own services and grpc.health.v1. Such a
// call goes where it was sent, never rerouted, retried or taken as a sign
// of death.
func Instance(fullMethod string) bool {
	return GoPlugin(fullMethod) || strings.HasPrefix(fullMethod, "/grpc.health.v1.Health/")
}
