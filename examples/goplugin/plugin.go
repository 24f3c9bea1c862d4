//go:build unix

package main

import (
	"context"
	"os"
	"sync"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// Configurable is the plugin's interface, as a host declares its own: the
// host pushes its config into the plugin, and the plugin works from it.
type Configurable interface {
	Configure(ctx context.Context, config string) error
	Config(ctx context.Context) (string, error)
}

// handshake is shared by the host and the plugin, as in any go-plugin
// host. go-plugin sets the magic cookie in the plugin's environment: this
// binary is the plugin when it finds it there.
var handshake = plugin.HandshakeConfig{
	ProtocolVersion:  1,
	MagicCookieKey:   "RESPAWN_GOPLUGIN_EXAMPLE",
	MagicCookieValue: "configurable",
}

// pluginName is the name the plugin is dispensed by.
const pluginName = "configurable"

// The RPCs, with protobuf well-known types, so the example needs no
// generated code.
const (
	configureMethod = "/example.Configurable/Configure" // StringValue → Empty
	configMethod    = "/example.Configurable/Config"    // Empty → StringValue
)

// configurablePlugin is the go-plugin plugin: it serves a Configurable on
// the plugin side (impl) and dispenses a client of it on the host side
// (impl nil).
type configurablePlugin struct {
	plugin.NetRPCUnsupportedPlugin
	impl Configurable
}

var _ plugin.GRPCPlugin = (*configurablePlugin)(nil)

func (p *configurablePlugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	s.RegisterService(&configurableService, p.impl)
	return nil
}

func (p *configurablePlugin) GRPCClient(_ context.Context, _ *plugin.GRPCBroker, cc *grpc.ClientConn) (any, error) {
	return &configurableClient{cc: cc}, nil
}

// plugins is the plugin map; impl is nil on the host side.
func plugins(impl Configurable) plugin.PluginSet {
	return plugin.PluginSet{pluginName: &configurablePlugin{impl: impl}}
}

// configurableService describes the service by hand, as protoc-gen-go-grpc
// would.
var configurableService = grpc.ServiceDesc{
	ServiceName: "example.Configurable",
	HandlerType: (*Configurable)(nil),
	Methods: []grpc.MethodDesc{
		{MethodName: "Configure", Handler: func(srv any, ctx context.Context, dec func(any) error, icpt grpc.UnaryServerInterceptor) (any, error) {
			in := new(wrapperspb.StringValue)
			if err := dec(in); err != nil {
				return nil, err
			}
			return serve(ctx, icpt, srv, configureMethod, in, func(ctx context.Context) (any, error) {
				return new(emptypb.Empty), srv.(Configurable).Configure(ctx, in.GetValue())
			})
		}},
		{MethodName: "Config", Handler: func(srv any, ctx context.Context, dec func(any) error, icpt grpc.UnaryServerInterceptor) (any, error) {
			in := new(emptypb.Empty)
			if err := dec(in); err != nil {
				return nil, err
			}
			return serve(ctx, icpt, srv, configMethod, in, func(ctx context.Context) (any, error) {
				config, err := srv.(Configurable).Config(ctx)
				return wrapperspb.String(config), err
			})
		}},
	},
}

// serve runs a handler through the server's interceptor, if any, as
// generated code does.
func serve(ctx context.Context, icpt grpc.UnaryServerInterceptor, srv any, method string, in any, h func(context.Context) (any, error)) (any, error) {
	if icpt == nil {
		return h(ctx)
	}
	info := &grpc.UnaryServerInfo{Server: srv, FullMethod: method}
	return icpt(ctx, in, info, func(ctx context.Context, _ any) (any, error) { return h(ctx) })
}

// configurableClient is the host's Configurable: a stub on the plugin's
// connection.
type configurableClient struct{ cc grpc.ClientConnInterface }

func (c *configurableClient) Configure(ctx context.Context, config string) error {
	return c.cc.Invoke(ctx, configureMethod, wrapperspb.String(config), new(emptypb.Empty))
}

func (c *configurableClient) Config(ctx context.Context) (string, error) {
	out := new(wrapperspb.StringValue)
	err := c.cc.Invoke(ctx, configMethod, new(emptypb.Empty), out)
	return out.GetValue(), err
}

// configurableServer is the plugin's Configurable: it keeps the config in
// memory, which a new plugin does not have until the host pushes it again.
type configurableServer struct {
	mu     sync.Mutex
	config string
}

func (s *configurableServer) Configure(_ context.Context, config string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.config = config
	return nil
}

func (s *configurableServer) Config(context.Context) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.config, nil
}

// isPlugin reports whether this process was launched by a go-plugin host
// as its plugin.
func isPlugin() bool {
	return os.Getenv(handshake.MagicCookieKey) == handshake.MagicCookieValue
}

// servePlugin is the plugin's main; go-plugin exits the process when the
// host stops it.
func servePlugin() {
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig: handshake,
		Plugins:         plugins(&configurableServer{}),
		GRPCServer:      plugin.DefaultGRPCServer,
		Logger:          hclog.New(&hclog.LoggerOptions{Output: os.Stderr, Level: hclog.Warn}),
	})
}
