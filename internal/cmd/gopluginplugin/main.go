// Command gopluginplugin is a hashicorp/go-plugin gRPC plugin for respawn's
// tests. It serves testpb.Test (internal/testplugin) through plugin.Serve,
// with the handshake and plugin map of internal/goplugintest. Append
// journals to the file named by the environment variable
// goplugintest.JournalEnv, so executions survive a SIGKILL and can be
// counted across respawns. With goplugintest.ExitAtStartEnv set to a code,
// it exits with that code before it serves (a plugin that crashes at
// start). It keeps a ledger (package ledger) when its host gives it one;
// with goplugintest.KillAfterCompletedEnv, it dies once after a recorded
// call's completion.
// It must be launched by a go-plugin host.
package main

import (
	"os"
	"strconv"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/grpc-respawn/respawn/internal/goplugintest"
	"github.com/grpc-respawn/respawn/internal/ledgerwire"
	"github.com/grpc-respawn/respawn/internal/testplugin"
	"github.com/grpc-respawn/respawn/ledger"
)

// killOnce SIGKILLs this process if the file once can be created.
func killOnce(once string) {
	f, err := os.OpenFile(once, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return
	}
	f.Close()
	if self, err := os.FindProcess(os.Getpid()); err == nil {
		_ = self.Kill()
	}
	select {} // the signal is on its way
}

func main() {
	if code, err := strconv.Atoi(os.Getenv(goplugintest.ExitAtStartEnv)); err == nil {
		os.Exit(code)
	}
	srv := testplugin.New(os.Getenv(goplugintest.JournalEnv))
	if once := os.Getenv(goplugintest.KillAfterCompletedEnv); once != "" {
		ledgerwire.At = func(p ledgerwire.Point) {
			if p == ledgerwire.AfterCompleted {
				killOnce(once)
			}
		}
	}
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig: goplugintest.Handshake,
		Plugins:         goplugintest.Plugins(srv),
		// The ledger, as a go-plugin plugin adds it: its ServerOptions.
		GRPCServer: func(opts []grpc.ServerOption) *grpc.Server {
			return plugin.DefaultGRPCServer(append(opts, ledger.ServerOptions(ledger.Config{})...))
		},
		Logger: hclog.New(&hclog.LoggerOptions{
			Name:   "gopluginplugin",
			Output: os.Stderr,
			Level:  hclog.Warn,
		}),
	})
}
