package goplugin_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"

	"github.com/grpc-respawn/respawn/interceptor"
	"github.com/grpc-respawn/respawn/internal/goplugintest"
	"github.com/grpc-respawn/respawn/internal/testpb"
	"github.com/grpc-respawn/respawn/redial"
	"github.com/grpc-respawn/respawn/redial/goplugin"
)

func ExampleNew() {
	dir, err := os.MkdirTemp("", "respawn-example-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	bin, err := goplugintest.Build(dir)
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	hook := goplugin.New(func() *plugin.ClientConfig {
		return &plugin.ClientConfig{
			HandshakeConfig:  goplugintest.Handshake,
			Plugins:          goplugintest.Plugins(nil),
			Cmd:              exec.Command(bin), // a new Cmd per launch
			AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
			Logger:           hclog.NewNullLogger(),
		}
	})
	rc, err := redial.New(hook, redial.WithPolicy(interceptor.New()))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer rc.Close() // stops the plugin and its go-plugin client

	raw, err := hook.Dispense(ctx, rc, goplugintest.Name)
	if err != nil {
		fmt.Println(err)
		return
	}
	kv := raw.(testpb.TestClient)
	if _, err := kv.Put(ctx, &testpb.PutRequest{Key: "greeting", Value: "hello"}); err != nil {
		fmt.Println(err)
		return
	}
	resp, err := kv.Get(ctx, &testpb.GetRequest{Key: "greeting"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(resp.GetValue(), "from plugin", rc.Current().Number())
	// Output: hello from plugin 1
}
