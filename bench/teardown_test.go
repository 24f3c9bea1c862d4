//go:build linux

package bench

import (
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/grpc-respawn/respawn/internal/testpb"
	"github.com/grpc-respawn/respawn/redial"
)

// benchRecoveryTeardown measures the floor below any recovery that waits
// for evidence: from SIGKILL of a plugin at rest (launched by command.Hook,
// served two calls, then idle for [atRest]) to the kernel reporting its
// exit (its pidfd readable, "exit-ms"), to redial having reaped it and
// reported its exit (Process.Done, "reaped-ms"), and to a client
// connection to its socket reading EOF ("sockclosed-ms"); and the first
// Get on a plugin that has only answered a health check, [atRest] before,
// as a spare has ("coldcall-ms"), and a second one ("call-ms"): a call
// answered by a promoted spare cannot succeed sooner than about exit +
// coldcall. ns/op is the whole iteration, the launch, the calls and the
// two rests included.
func benchRecoveryTeardown(b *testing.B) {
	cmd := pluginCommand(b, "")
	var exit, reaped, sock, cold, call []time.Duration
	b.ReportAllocs()
	b.ResetTimer() // the plugin's build, the first time
	for i := 0; i < b.N; i++ {
		ctx, cancel := callCtx()
		be, err := cmd.Respawn(ctx, redial.Request{})
		if err != nil {
			cancel()
			b.Fatal(err)
		}
		cc, err := grpc.NewClient(be.Target, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			b.Fatal(err)
		}
		client := testpb.NewTestClient(cc)
		// READY and health-checked, as a spare is.
		_, err = healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{})
		time.Sleep(atRest)
		for _, d := range []*[]time.Duration{&cold, &call} {
			began := time.Now()
			if err == nil {
				_, err = client.Get(ctx, &testpb.GetRequest{Key: "k"})
			}
			*d = append(*d, time.Since(began))
		}
		if err != nil {
			b.Fatal(err)
		}
		raw, err := net.Dial("unix", strings.TrimPrefix(be.Target, "unix://"))
		if err != nil {
			b.Fatal(err)
		}
		pidfd, err := unix.PidfdOpen(be.Process.PID, 0)
		if err != nil {
			b.Skipf("no pidfd: %v", err)
		}
		exited, closed := make(chan time.Time, 1), make(chan time.Time, 1)
		go func() {
			fds := []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}
			for {
				if _, err := unix.Poll(fds, -1); !errors.Is(err, unix.EINTR) {
					break
				}
			}
			exited <- time.Now()
		}()
		go func() {
			var buf [64]byte
			for {
				if _, err := raw.Read(buf[:]); err != nil {
					break
				}
			}
			closed <- time.Now()
		}()

		time.Sleep(atRest)
		began := time.Now()
		if !killProcess(be.Process) {
			b.Fatal("plugin already gone")
		}
		<-be.Process.Done()
		reapedAt := time.Now()
		exit = append(exit, (<-exited).Sub(began))
		sock = append(sock, (<-closed).Sub(began))
		reaped = append(reaped, reapedAt.Sub(began))

		_ = unix.Close(pidfd)
		_ = raw.Close()
		_ = cc.Close()
		_ = be.Stop()
		cancel()
	}
	reportPercentiles(b, exit, "exit-ms")
	reportPercentiles(b, reaped, "reaped-ms")
	reportPercentiles(b, sock, "sockclosed-ms")
	reportPercentiles(b, cold, "coldcall-ms")
	reportPercentiles(b, call, "call-ms")
}

func init() { benchRecoveryTeardownFunc = benchRecoveryTeardown }
