//go:build unix

package goplugin_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"go.uber.org/goleak"

	"github.com/grpc-respawn/respawn/interceptor"
	"github.com/grpc-respawn/respawn/internal/goplugintest"
	"github.com/grpc-respawn/respawn/internal/testpb"
	"github.com/grpc-respawn/respawn/redial"
	"github.com/grpc-respawn/respawn/redial/goplugin"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// A go-plugin host, as it was, plus a respawn hook and a call policy. The
// plugin is SIGKILLed, as the OOM killer would; the host keeps calling the
// stub it dispensed once, and the config it had pushed is there again.
func Example() {
	dir, err := os.MkdirTemp("", "respawn-example-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	bin, err := goplugintest.Build(dir) // the plugin binary
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// The host's ClientConfig, unchanged, built anew for every launch.
	config := func() *plugin.ClientConfig {
		return &plugin.ClientConfig{
			HandshakeConfig:  goplugintest.Handshake,
			Plugins:          goplugintest.Plugins(nil),
			Cmd:              exec.Command(bin),
			AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
			Logger:           hclog.NewNullLogger(),
		}
	}
	// What the host tells each plugin at start, like Velero's Init(config).
	pushConfig := func(ctx context.Context, c plugin.ClientProtocol) error {
		raw, err := c.Dispense(goplugintest.Name)
		if err != nil {
			return err
		}
		_, err = raw.(testpb.TestClient).Put(ctx, &testpb.PutRequest{Key: "config", Value: "v1"})
		return err
	}

	// The two additions: a hook and a policy.
	hook := goplugin.New(config, goplugin.WithInit(pushConfig))
	rc, err := redial.New(hook, redial.WithPolicy(interceptor.New()))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer rc.Close()

	raw, err := hook.Dispense(ctx, rc, goplugintest.Name) // once
	if err != nil {
		fmt.Println(err)
		return
	}
	kv := raw.(testpb.TestClient)
	show := func(when string) int64 {
		resp, err := kv.Get(ctx, &testpb.GetRequest{Key: "config"})
		if err != nil {
			fmt.Println(when, "error:", err)
			return 0
		}
		fmt.Printf("%s: config = %s\n", when, resp.GetValue())
		return resp.GetPid()
	}
	first := show("first plugin")

	p := rc.Current().Process()
	_ = syscall.Kill(p.PID(), syscall.SIGKILL)
	<-p.Done()
	e, _ := p.Exit()
	fmt.Printf("plugin killed by signal %d (%v)\n", int(e.Signal), e.Signal)

	second := show("after the kill")
	fmt.Println("answered by a new process:", second != first && second != 0)
	fmt.Println("respawns:", rc.Stats().Respawns)
	// Output:
	// first plugin: config = v1
	// plugin killed by signal 9 (killed)
	// after the kill: config = v1
	// answered by a new process: true
	// respawns: 1
}
