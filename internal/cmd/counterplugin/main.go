// Command counterplugin is a hashicorp/go-plugin plugin that calls back
// into its host through the GRPCBroker (see package countertest).
package main

import (
	"github.com/hashicorp/go-plugin"

	"github.com/grpc-respawn/respawn/internal/countertest"
)

func main() {
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig: countertest.Handshake,
		Plugins:         countertest.Plugins(),
		GRPCServer:      plugin.DefaultGRPCServer,
	})
}
