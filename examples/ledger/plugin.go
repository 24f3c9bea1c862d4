//go:build unix

package main

import (
	"context"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// Account is the plugin's interface, as a host declares its own: Deposit
// adds to the balance, so it must not run twice; Balance only reads it.
type Account interface {
	Deposit(ctx context.Context, amount int64) (balance int64, err error)
	Balance(ctx context.Context) (int64, error)
}

// handshake is shared by the host and the plugin, as in any go-plugin
// host. go-plugin sets the magic cookie in the plugin's environment: this
// binary is the plugin when it finds it there.
var handshake = plugin.HandshakeConfig{
	ProtocolVersion:  1,
	MagicCookieKey:   "RESPAWN_LEDGER_EXAMPLE",
	MagicCookieValue: "account",
}

// pluginName is the name the plugin is dispensed by.
const pluginName = "account"

// The RPCs, with protobuf well-known types, so the example needs no
// generated code.
const (
	depositMethod = "/example.Account/Deposit" // Int64Value amount → Int64Value new balance
	balanceMethod = "/example.Account/Balance" // Empty → Int64Value
)

// accountPlugin is the go-plugin plugin: it serves an Account on the
// plugin side (impl) and dispenses a client of it on the host side (impl
// nil).
type accountPlugin struct {
	plugin.NetRPCUnsupportedPlugin
	impl Account
}

var _ plugin.GRPCPlugin = (*accountPlugin)(nil)

func (p *accountPlugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	s.RegisterService(&accountService, p.impl)
	return nil
}

func (p *accountPlugin) GRPCClient(_ context.Context, _ *plugin.GRPCBroker, cc *grpc.ClientConn) (any, error) {
	return &accountClient{cc: cc}, nil
}

// plugins is the plugin map; impl is nil on the host side.
func plugins(impl Account) plugin.PluginSet {
	return plugin.PluginSet{pluginName: &accountPlugin{impl: impl}}
}

// accountService describes the service by hand, as protoc-gen-go-grpc
// would.
var accountService = grpc.ServiceDesc{
	ServiceName: "example.Account",
	HandlerType: (*Account)(nil),
	Methods: []grpc.MethodDesc{
		{MethodName: "Deposit", Handler: func(srv any, ctx context.Context, dec func(any) error, icpt grpc.UnaryServerInterceptor) (any, error) {
			in := new(wrapperspb.Int64Value)
			if err := dec(in); err != nil {
				return nil, err
			}
			return serve(ctx, icpt, srv, depositMethod, in, func(ctx context.Context) (any, error) {
				balance, err := srv.(Account).Deposit(ctx, in.GetValue())
				return wrapperspb.Int64(balance), err
			})
		}},
		{MethodName: "Balance", Handler: func(srv any, ctx context.Context, dec func(any) error, icpt grpc.UnaryServerInterceptor) (any, error) {
			in := new(emptypb.Empty)
			if err := dec(in); err != nil {
				return nil, err
			}
			return serve(ctx, icpt, srv, balanceMethod, in, func(ctx context.Context) (any, error) {
				balance, err := srv.(Account).Balance(ctx)
				return wrapperspb.Int64(balance), err
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

// accountClient is the host's Account: a stub on the plugin's connection.
type accountClient struct{ cc grpc.ClientConnInterface }

func (c *accountClient) Deposit(ctx context.Context, amount int64) (int64, error) {
	out := new(wrapperspb.Int64Value)
	err := c.cc.Invoke(ctx, depositMethod, wrapperspb.Int64(amount), out)
	return out.GetValue(), err
}

func (c *accountClient) Balance(ctx context.Context) (int64, error) {
	out := new(wrapperspb.Int64Value)
	err := c.cc.Invoke(ctx, balanceMethod, new(emptypb.Empty), out)
	return out.GetValue(), err
}
