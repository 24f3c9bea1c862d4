//go:build unix

package redial_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"syscall"
	"time"

	"github.com/grpc-respawn/respawn/interceptor"
	"github.com/grpc-respawn/respawn/internal/plugintest"
	"github.com/grpc-respawn/respawn/internal/testpb"
	"github.com/grpc-respawn/respawn/redial"
)

// buildPlugin builds the test plugin into a fresh temp dir. A real host
// knows its plugin's path; the examples have to build one.
func buildPlugin() (bin string, cleanup func()) {
	dir, err := os.MkdirTemp("", "redial-example-")
	if err != nil {
		log.Fatal(err)
	}
	bin, err = plugintest.Build(dir)
	if err != nil {
		_ = os.RemoveAll(dir)
		log.Fatal(err)
	}
	return bin, func() { _ = os.RemoveAll(dir) }
}

// killPluginOf SIGKILLs the current plugin, as the OOM killer would, and
// waits until it is gone.
func killPluginOf(rc *redial.Conn) *redial.Generation {
	g := rc.Current()
	p := g.Process()
	if err := syscall.Kill(p.PID(), syscall.SIGKILL); err != nil {
		log.Fatal(err)
	}
	<-p.Done()
	return g
}

// A stub bound to a Conn keeps working after its plugin dies: the policy
// from package interceptor sees the failure, has redial start a new plugin
// and retries the call there.
func Example() {
	bin, cleanup := buildPlugin()
	defer cleanup()

	rc, err := redial.New(&redial.Command{Path: bin}, redial.WithPolicy(interceptor.New()))
	if err != nil {
		log.Fatal(err)
	}
	defer rc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client := testpb.NewTestClient(rc)

	if _, err := client.Get(ctx, &testpb.GetRequest{Id: "1"}); err != nil {
		log.Fatal(err)
	}
	fmt.Println("call 1: ok")

	killPluginOf(rc)
	fmt.Println("plugin killed")

	if _, err := client.Get(ctx, &testpb.GetRequest{Id: "2"}); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("call 2: ok (generation %d)\n", rc.Current().Number())
	// Output:
	// call 1: ok
	// plugin killed
	// call 2: ok (generation 2)
}

// Without a policy, the host replaces a dead plugin itself: Replace starts
// one respawn however many callers ask, and returns the new generation.
func ExampleConn_Replace() {
	bin, cleanup := buildPlugin()
	defer cleanup()

	rc, err := redial.New(&redial.Command{Path: bin})
	if err != nil {
		log.Fatal(err)
	}
	defer rc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := rc.Connect(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("generation", rc.Current().Number())

	old := killPluginOf(rc)
	g, err := rc.Replace(ctx, old, errors.New("plugin died"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("generation", g.Number())

	resp, err := testpb.NewTestClient(rc).Get(ctx, &testpb.GetRequest{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("served by the new plugin:", resp.GetPid() == int64(g.Process().PID()))
	// Output:
	// generation 1
	// generation 2
	// served by the new plugin: true
}
