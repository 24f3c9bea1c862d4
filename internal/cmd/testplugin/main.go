// Command testplugin is a gRPC plugin process for respawn's tests. It serves
// testpb.Test (and grpc.health.v1) on a unix socket in a fresh private temp
// dir and prints exactly one line to stdout, "unix://<absolute socket path>",
// once it is listening. It serves until SIGTERM or SIGINT (then stops
// gracefully and removes its dir) or until killed. Logs go to stderr only, as
// stdout is the handshake channel.
//
// Flags select failure modes a plugin host must survive:
//
//	-journal PATH        file where Append records each execution
//	-exit-at-start       exit 3 before printing anything (cannot start)
//	-exit-after-start    print the address, then exit 4 without serving (crash loop)
//	-start-delay D       sleep D before listening (slow start)
//	-no-health           do not register the health service
//	-garbage             print a non-address line, then run until killed
//	-upstream TARGET     forward Get, Put and Append to the Test service at
//	                     TARGET and return its errors unchanged (a proxy)
//	-die-on KEY          a Get for KEY SIGKILLs the plugin (a poison request)
//
// It never touches its process group, so it behaves the same whether or not
// the host starts it in a group of its own.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"

	"github.com/grpc-respawn/respawn/internal/testpb"
	"github.com/grpc-respawn/respawn/internal/testplugin"
)

// Exit codes, distinct so tests can tell the failure modes apart.
const (
	exitError      = 1
	exitAtStart    = 3
	exitAfterStart = 4
)

// stopGrace bounds GracefulStop: open streams (health Watch, Test.Watch)
// would otherwise keep the process alive after SIGTERM.
const stopGrace = 5 * time.Second

func main() {
	journal := flag.String("journal", "", "file where Append records each execution (`path`)")
	atStart := flag.Bool("exit-at-start", false, "exit 3 before printing anything")
	afterStart := flag.Bool("exit-after-start", false, "print the address, then exit 4 without serving")
	startDelay := flag.Duration("start-delay", 0, "sleep this long before listening")
	noHealth := flag.Bool("no-health", false, "do not register the grpc.health.v1 service")
	garbage := flag.Bool("garbage", false, "print a non-address line, then run until killed")
	upstream := flag.String("upstream", "", "forward calls to the Test service at this gRPC `target`")
	dieOn := flag.String("die-on", "", "a Get for this `key` SIGKILLs the plugin")
	flag.Parse()
	log.SetOutput(os.Stderr)
	log.SetPrefix(fmt.Sprintf("testplugin[%d] ", os.Getpid()))

	if *atStart {
		os.Exit(exitAtStart)
	}
	// Register for signals before anything slow, so a SIGTERM during the
	// start delay still leads to a clean exit.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	if *startDelay > 0 {
		select {
		case <-time.After(*startDelay):
		case <-ctx.Done():
			return
		}
	}
	if *garbage {
		fmt.Println("this is not an address")
		<-ctx.Done()
		return
	}
	srv := testplugin.New(*journal)
	srv.DieOn = *dieOn
	if *upstream != "" {
		cc, err := grpc.NewClient(*upstream, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			log.Fatal(err)
		}
		defer cc.Close()
		srv.Upstream = testpb.NewTestClient(cc)
	}
	if err := run(ctx, srv, *afterStart, !*noHealth); err != nil {
		log.Print(err)
		os.Exit(exitError)
	}
}

// run listens, prints the address and serves until ctx ends.
func run(ctx context.Context, srv *testplugin.Server, exitAfterPrint, withHealth bool) error {
	dir, err := os.MkdirTemp("", "respawn-testplugin-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	// MkdirTemp already uses 0700; chmod anyway so a umask or a future
	// change cannot expose the socket to other users.
	if err := os.Chmod(dir, 0o700); err != nil {
		return err
	}
	sock, err := filepath.Abs(filepath.Join(dir, "plugin.sock"))
	if err != nil {
		return err
	}
	lis, err := net.Listen("unix", sock)
	if err != nil {
		return err
	}
	defer lis.Close()

	if _, err := fmt.Printf("unix://%s\n", sock); err != nil {
		return fmt.Errorf("print address: %w", err)
	}
	if exitAfterPrint {
		lis.Close()
		os.RemoveAll(dir) // os.Exit skips deferred calls
		os.Exit(exitAfterStart)
	}

	s := grpc.NewServer()
	var hs *health.Server
	if withHealth {
		hs = testplugin.Register(s, srv)
	} else {
		testpb.RegisterTestServer(s, srv)
	}

	errc := make(chan error, 1)
	go func() { errc <- s.Serve(lis) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	log.Print("stopping")
	if hs != nil {
		// Tell health watchers we are going before draining connections.
		hs.Shutdown()
	}
	stopped := make(chan struct{})
	go func() {
		s.GracefulStop()
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-time.After(stopGrace):
		s.Stop()
		<-stopped
	}
	// A SIGTERM right after the address was printed can stop the server
	// before Serve ran; Serve then reports ErrServerStopped: still clean.
	if err := <-errc; err != grpc.ErrServerStopped {
		return err
	}
	return nil
}
