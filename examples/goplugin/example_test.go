//go:build unix

package main

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// TestMain makes the test binary the plugin when go-plugin launches it, as
// main does.
func TestMain(m *testing.M) {
	if isPlugin() {
		servePlugin()
		return
	}
	goleak.VerifyTestMain(m)
}

// A go-plugin host, as it was, with goplugin.Connect in place of
// plugin.NewClient and Client. Its
// plugin is SIGKILLed twice, as the OOM killer would; the host keeps
// calling the stub it dispensed once, and each new plugin has the config
// the host had pushed last, replayed by goplugin.Config.Init.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := run(ctx, os.Stdout); err != nil {
		fmt.Println(err)
	}
	// Output:
	// first plugin: the plugin's config is "v1"
	// plugin killed by signal 9 (killed)
	// after kill 1: the plugin's config is "v1"
	// answered by a new process: true
	// the host changes its config to "v2"
	// plugin killed by signal 9 (killed)
	// after kill 2: the plugin's config is "v2"
	// answered by a new process: true
	// respawns: 2
}
