//go:build unix

package goplugin_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"

	"github.com/grpc-respawn/respawn/goplugin"
	"github.com/grpc-respawn/respawn/internal/goplugintest"
	"github.com/grpc-respawn/respawn/internal/testpb"
	"github.com/grpc-respawn/respawn/internal/testplugin"
)

// storeHandshake launches this example's plugin: an object store whose
// Put(location, config) stands for a Velero ObjectStore's Init(config) of
// one storage location, kept in the plugin's memory.
var storeHandshake = plugin.HandshakeConfig{
	ProtocolVersion:  1,
	MagicCookieKey:   "RESPAWN_GOPLUGIN_EXAMPLE_STORE",
	MagicCookieValue: "locations",
}

func init() {
	if os.Getenv(storeHandshake.MagicCookieKey) == storeHandshake.MagicCookieValue {
		plugin.Serve(&plugin.ServeConfig{
			HandshakeConfig: storeHandshake,
			Plugins:         plugin.PluginSet{"store": &goplugintest.Plugin{Impl: testplugin.New("")}},
			GRPCServer:      plugin.DefaultGRPCServer,
			Logger:          hclog.NewNullLogger(),
		})
		os.Exit(0)
	}
}

// initialised is what the host has initialised in its plugin so far: one
// store per storage location, each with its own config, recorded when the
// location is first used. Config.Init replays all of it on every new
// plugin. It is safe for concurrent use.
type initialised struct {
	mu      sync.Mutex
	order   []string          // first use first
	configs map[string]string // by location
}

// replay is the Config.Init: it initialises, on a new plugin and before
// any call reaches it, every location initialised on the plugins before.
// Its calls go to that new plugin only; it must not wait for the Conn
// (no call on conn, no lock held across one).
func (in *initialised) replay(ctx context.Context, cp plugin.ClientProtocol) error {
	raw, err := cp.Dispense("store")
	if err != nil {
		return err
	}
	store := raw.(testpb.TestClient)
	in.mu.Lock()
	order, configs := append([]string(nil), in.order...), make(map[string]string, len(in.configs))
	for k, v := range in.configs {
		configs[k] = v
	}
	in.mu.Unlock()
	for _, location := range order {
		if _, err := store.Put(ctx, &testpb.PutRequest{Key: location, Value: configs[location]}); err != nil {
			return fmt.Errorf("init of location %s: %w", location, err)
		}
	}
	return nil
}

// use initialises location's store the first time it is used. The location
// is recorded before the call, so that a plugin that replaces this one
// while the call runs is initialised too (an Init that sets a config is
// idempotent: it may run twice), and forgotten if the call fails, so that
// a config the plugin refuses does not fail every later respawn. The lock
// is not held across the call, which may wait for a respawn whose replay
// takes it.
func (in *initialised) use(ctx context.Context, store testpb.TestClient, location, config string) error {
	in.mu.Lock()
	if _, ok := in.configs[location]; ok {
		in.mu.Unlock()
		return nil
	}
	in.order = append(in.order, location)
	in.configs[location] = config
	in.mu.Unlock()
	if _, err := store.Put(ctx, &testpb.PutRequest{Key: location, Value: config}); err != nil {
		in.forget(location)
		return err
	}
	return nil
}

func (in *initialised) forget(location string) {
	in.mu.Lock()
	defer in.mu.Unlock()
	delete(in.configs, location)
	for i, l := range in.order {
		if l == location {
			in.order = append(in.order[:i], in.order[i+1:]...)
			break
		}
	}
}

// Example_initialisedInstances: one plugin binary serves many instances,
// each initialised with its own config when first used (Velero's object
// store per storage location). Config.Init replays every instance
// initialised so far on each new plugin, so after the plugin is killed
// both locations answer from its successor with their own config.
func Example_initialisedInstances() {
	bin, err := os.Executable() // a real host knows its plugin's path
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	in := &initialised{configs: make(map[string]string)}
	conn, err := goplugin.Connect(ctx, goplugin.Config{
		Client: func() *plugin.ClientConfig {
			return &plugin.ClientConfig{
				HandshakeConfig:  storeHandshake,
				Plugins:          plugin.PluginSet{"store": &goplugintest.Plugin{}},
				Cmd:              exec.Command(bin),
				AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
				Logger:           hclog.NewNullLogger(),
			}
		},
		Init: in.replay,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer conn.Close()
	raw, err := conn.Dispense(ctx, "store")
	if err != nil {
		fmt.Println(err)
		return
	}
	store := raw.(testpb.TestClient)
	for location, config := range map[string]string{"default": "s3://backups", "archive": "gs://archive"} {
		if err := in.use(ctx, store, location, config); err != nil {
			fmt.Println(err)
			return
		}
	}

	// The plugin is killed (an OOM kill, say); its successor starts empty.
	_ = syscall.Kill(conn.Current().Process().PID, syscall.SIGKILL)
	<-conn.Current().Process().Done()

	for _, location := range []string{"archive", "default"} {
		resp, err := store.Get(ctx, &testpb.GetRequest{Key: location}) // Get is safe to retry
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("%s: %s, from plugin %d\n", location, resp.GetValue(), conn.Current().Number())
	}
	// Output:
	// archive: gs://archive, from plugin 2
	// default: s3://backups, from plugin 2
}
