package goplugin_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health/grpc_health_v1"

	"github.com/grpc-respawn/respawn/goplugin"
)

// handshake is shared by the host and its plugin, as in any go-plugin host.
// This example's plugin is the example's own binary: go-plugin sets the
// magic cookie in the plugin's environment, and init below serves the
// plugin when it finds it there.
var handshake = plugin.HandshakeConfig{
	ProtocolVersion:  1,
	MagicCookieKey:   "RESPAWN_GOPLUGIN_EXAMPLE_PLUGIN",
	MagicCookieValue: "health",
}

// healthPlugin is the go-plugin plugin. A real plugin registers its own
// service in GRPCServer and dispenses its client in GRPCClient; this one
// dispenses a client of the grpc.health.v1 service go-plugin serves in every
// plugin, so that the example needs no generated code.
type healthPlugin struct{ plugin.NetRPCUnsupportedPlugin }

func (healthPlugin) GRPCServer(*plugin.GRPCBroker, *grpc.Server) error { return nil }

func (healthPlugin) GRPCClient(_ context.Context, _ *plugin.GRPCBroker, cc *grpc.ClientConn) (any, error) {
	return grpc_health_v1.NewHealthClient(cc), nil
}

var plugins = plugin.PluginSet{"health": healthPlugin{}}

func init() {
	if os.Getenv(handshake.MagicCookieKey) == handshake.MagicCookieValue {
		plugin.Serve(&plugin.ServeConfig{
			HandshakeConfig: handshake,
			Plugins:         plugins,
			GRPCServer:      plugin.DefaultGRPCServer,
			Logger:          hclog.NewNullLogger(),
		})
		os.Exit(0)
	}
}

func ExampleConnect() {
	bin, err := os.Executable() // a real host knows its plugin's path
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := goplugin.Connect(ctx, goplugin.Config{
		Client: func() *plugin.ClientConfig {
			return &plugin.ClientConfig{
				HandshakeConfig:  handshake,
				Plugins:          plugins,
				Cmd:              exec.Command(bin), // a new Cmd per launch
				AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
				Logger:           hclog.NewNullLogger(),
			}
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer conn.Close()                       // stops the plugin and its go-plugin client
	raw, err := conn.Dispense(ctx, "health") // once, kept across respawns
	if err != nil {
		fmt.Println(err)
		return
	}
	client := raw.(grpc_health_v1.HealthClient)
	resp, err := client.Check(ctx, &grpc_health_v1.HealthCheckRequest{Service: plugin.GRPCServiceName})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(resp.GetStatus(), "from plugin", conn.Current().Number())
	// Output: SERVING from plugin 1
}
