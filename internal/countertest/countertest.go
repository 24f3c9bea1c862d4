// Package countertest is a go-plugin plugin that calls back into its host
// through the GRPCBroker, like go-plugin's own examples/bidirectional: the
// host's Put hands the plugin an AddHelper served on a broker id, and the
// plugin asks it to add. It uses that example's protos. The broker id means
// something only to the plugin instance whose broker handed it out, which
// is what makes such plugins hard to respawn.
package countertest

import (
	"context"
	"os/exec"
	"sync"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"github.com/hashicorp/go-plugin/examples/bidirectional/proto"
	"google.golang.org/grpc"

	"github.com/grpc-respawn/respawn/internal/plugintest"
)

// Package is the import path of the plugin binary.
const Package = "github.com/grpc-respawn/respawn/internal/cmd/counterplugin"

// Name is the name the plugin is dispensed by.
const Name = "counter"

// PutMethod is the method whose request carries a broker id.
const PutMethod = "/proto.Counter/Put"

// GetMethod reads a counter; it has no side effects.
const GetMethod = "/proto.Counter/Get"

// Handshake is shared by the plugin and its hosts.
var Handshake = plugin.HandshakeConfig{
	ProtocolVersion:  1,
	MagicCookieKey:   "RESPAWN_COUNTER_TEST",
	MagicCookieValue: "b1d1-respawn",
}

// Plugin is the counter: dispensing it returns a *Client.
type Plugin struct {
	plugin.NetRPCUnsupportedPlugin
}

var _ plugin.GRPCPlugin = (*Plugin)(nil)

// GRPCServer registers the counter, given the plugin's broker.
func (p *Plugin) GRPCServer(b *plugin.GRPCBroker, s *grpc.Server) error {
	proto.RegisterCounterServer(s, &server{broker: b})
	return nil
}

// GRPCClient returns a *Client bound to cc and to this client's broker.
func (p *Plugin) GRPCClient(_ context.Context, b *plugin.GRPCBroker, cc *grpc.ClientConn) (any, error) {
	return &Client{broker: b, counter: proto.NewCounterClient(cc)}, nil
}

// Plugins is the plugin map.
func Plugins() plugin.PluginSet { return plugin.PluginSet{Name: &Plugin{}} }

// Config returns a fresh ClientConfig that launches bin.
func Config(bin string) *plugin.ClientConfig {
	return &plugin.ClientConfig{
		HandshakeConfig:  Handshake,
		Plugins:          Plugins(),
		Cmd:              exec.Command(bin),
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		Logger:           hclog.NewNullLogger(),
	}
}

// BuildOnce builds the plugin binary once per test binary.
func BuildOnce(tb testing.TB) string { tb.Helper(); return plugintest.BuildOncePackage(tb, Package) }

// Client is the host's stub of one plugin instance.
type Client struct {
	broker  *plugin.GRPCBroker
	counter proto.CounterClient
}

// Put adds value to key's counter, asking the host's adder (served on a
// broker id for the length of the call) to do the sum.
func (c *Client) Put(ctx context.Context, key string, value int64) error {
	id := c.broker.NextId()
	srv := make(chan *grpc.Server, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.broker.AcceptAndServe(id, func(opts []grpc.ServerOption) *grpc.Server {
			s := grpc.NewServer(opts...)
			proto.RegisterAddHelperServer(s, adder{})
			srv <- s
			return s
		})
	}()
	_, err := c.counter.Put(ctx, &proto.PutRequest{AddServer: id, Key: key, Value: value})
	select {
	case s := <-srv:
		s.Stop()
		<-done
	case <-done: // the broker refused the id: its plugin is gone
	}
	return err
}

// Get reads key's counter.
func (c *Client) Get(ctx context.Context, key string) (int64, error) {
	resp, err := c.counter.Get(ctx, &proto.GetRequest{Key: key})
	return resp.GetValue(), err
}

// adder is the host's side of the callback.
type adder struct {
	proto.UnimplementedAddHelperServer
}

func (adder) Sum(_ context.Context, req *proto.SumRequest) (*proto.SumResponse, error) {
	return &proto.SumResponse{R: req.GetA() + req.GetB()}, nil
}

// server is the plugin's counter: it keeps the counters in memory, and
// calls the host back through the broker id of each Put.
type server struct {
	proto.UnimplementedCounterServer
	broker *plugin.GRPCBroker
	mu     sync.Mutex
	values map[string]int64
}

func (s *server) Put(ctx context.Context, req *proto.PutRequest) (*proto.Empty, error) {
	conn, err := s.broker.Dial(req.GetAddServer())
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	s.mu.Lock()
	v := s.values[req.GetKey()]
	s.mu.Unlock()
	sum, err := proto.NewAddHelperClient(conn).Sum(ctx, &proto.SumRequest{A: v, B: req.GetValue()})
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	if s.values == nil {
		s.values = make(map[string]int64)
	}
	s.values[req.GetKey()] = sum.GetR()
	s.mu.Unlock()
	return &proto.Empty{}, nil
}

func (s *server) Get(_ context.Context, req *proto.GetRequest) (*proto.GetResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return &proto.GetResponse{Value: s.values[req.GetKey()]}, nil
}
