package main

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
)

// startChildren starts the children the flags ask for.
func startChildren(childFile, setsidFile string) error {
	if childFile != "" {
		if err := startChild(childFile, false); err != nil {
			return err
		}
	}
	if setsidFile != "" {
		return startChild(setsidFile, true)
	}
	return nil
}

// startChild starts this binary with -idle, holding stdout, and writes its
// pid to file.
func startChild(file string, ownSession bool) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := exec.Command(self, "-idle")
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if ownSession {
		setsid(cmd)
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	return os.WriteFile(file, []byte(strconv.Itoa(cmd.Process.Pid)), 0o600)
}

// dieDelay is how long after its last call a -die-after-calls plugin
// exits: long enough for the answer to reach the client even on a loaded
// machine (the interceptor counts the call before grpc-go writes the
// answer), short enough to die before most next calls.
const dieDelay = 50 * time.Millisecond

// dieAfter returns server options that make the process exit dieDelay
// after it has served n calls of testpb.Test (health checks do not count),
// whether unary or streams: a plugin that serves and then dies. n <= 0
// returns none.
func dieAfter(n int) []grpc.ServerOption {
	if n <= 0 {
		return nil
	}
	var served atomic.Int64
	done := func(method string) {
		if strings.HasPrefix(method, "/grpc.health.v1.") {
			return
		}
		if served.Add(1) == int64(n) {
			time.AfterFunc(dieDelay, func() { os.Exit(exitAfterCalls) })
		}
	}
	return []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			defer done(info.FullMethod)
			return h(ctx, req)
		}),
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			defer done(info.FullMethod)
			return h(srv, ss)
		}),
	}
}

// leaked holds what leak keeps, so the collector cannot free it.
var leaked [][]byte

// leak returns a server option that keeps n more bytes, every page
// written so they are resident, per unary testpb.Test call: a plugin whose
// memory grows until it is recycled or the OOM killer takes it. n <= 0
// returns none.
func leak(n int) []grpc.ServerOption {
	if n <= 0 {
		return nil
	}
	var mu sync.Mutex
	return []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			if !strings.HasPrefix(info.FullMethod, "/grpc.health.v1.") {
				b := make([]byte, n)
				for i := 0; i < n; i += 4096 {
					b[i] = 1
				}
				mu.Lock()
				leaked = append(leaked, b)
				mu.Unlock()
			}
			return h(ctx, req)
		}),
	}
}
