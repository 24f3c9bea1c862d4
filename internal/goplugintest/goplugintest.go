// Package goplugintest is the hashicorp/go-plugin side of respawn's tests:
// the handshake and plugin map shared by the gopluginplugin binary and the
// hosts that launch it, and a helper that builds the binary.
package goplugintest

import (
	"context"
	"os/exec"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/grpc-respawn/respawn/internal/plugintest"
	"github.com/grpc-respawn/respawn/internal/testpb"
)

// Package is the import path of the plugin binary.
const Package = "github.com/grpc-respawn/respawn/internal/cmd/gopluginplugin"

// Name is the name the plugin is dispensed by.
const Name = "test"

// JournalEnv names the environment variable that gives the plugin the path
// of its Append journal (see testplugin.New).
const JournalEnv = "RESPAWN_GOPLUGIN_JOURNAL"

// KillAfterCompletedEnv names the environment variable that makes the
// plugin SIGKILL itself once a recorded call's completion is in its ledger,
// before its answer is sent, if the file it names can be created: one
// plugin of a Conn dies there, its successors do not.
const KillAfterCompletedEnv = "RESPAWN_GOPLUGIN_KILL_AFTER_COMPLETED"

// ExitAtStartEnv names the environment variable that makes the plugin exit
// at once, before it serves, with the code it gives.
const ExitAtStartEnv = "RESPAWN_GOPLUGIN_EXIT_AT_START"

// Handshake is shared by the plugin and its hosts; a mismatch makes
// go-plugin refuse to start the plugin.
var Handshake = plugin.HandshakeConfig{
	ProtocolVersion:  1,
	MagicCookieKey:   "RESPAWN_GOPLUGIN_TEST",
	MagicCookieValue: "7c2e9f6a-respawn",
}

// Plugin serves testpb.Test over go-plugin's gRPC protocol. On the host
// side Impl is nil and dispensing returns a testpb.TestClient.
type Plugin struct {
	plugin.NetRPCUnsupportedPlugin
	Impl testpb.TestServer
}

var _ plugin.GRPCPlugin = (*Plugin)(nil)

// GRPCServer registers the Test service. go-plugin registers its own
// health service ("plugin"), so the plugin must not register another.
func (p *Plugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	testpb.RegisterTestServer(s, p.Impl)
	return nil
}

// GRPCClient returns a testpb.TestClient bound to cc, the connection of the
// client it is dispensed from.
func (p *Plugin) GRPCClient(_ context.Context, _ *plugin.GRPCBroker, cc *grpc.ClientConn) (any, error) {
	return testpb.NewTestClient(cc), nil
}

// Plugins is the plugin map; srv is nil on the host side.
func Plugins(srv testpb.TestServer) plugin.PluginSet {
	return plugin.PluginSet{Name: &Plugin{Impl: srv}}
}

// Config returns a fresh ClientConfig that launches bin with the journal at
// journal. go-plugin mutates the config it is given and an exec.Cmd runs
// once, so every launch needs a new one. Logs are discarded.
func Config(bin, journal string) *plugin.ClientConfig {
	cmd := exec.Command(bin)
	cmd.Env = []string{JournalEnv + "=" + journal}
	return &plugin.ClientConfig{
		HandshakeConfig:  Handshake,
		Plugins:          Plugins(nil),
		Cmd:              cmd,
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		Logger:           hclog.NewNullLogger(),
	}
}

// BuildOnce builds the plugin the first time it is called in a test binary
// and returns the cached path afterwards; see [plugintest.BuildOncePackage].
func BuildOnce(tb testing.TB) string { tb.Helper(); return plugintest.BuildOncePackage(tb, Package) }
