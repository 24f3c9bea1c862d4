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
//	-die-on KEY          a Get for KEY exits 2, as out of memory (a poison request)
//	-print LINE          print LINE instead of the address, then run until signalled
//	-huge-line N         print N bytes of 'x' without a newline, then run until signalled
//	-socket PATH         listen on this fixed path, unlinking a stale socket first
//	-ignore-sigterm      ignore SIGTERM (and SIGINT): only SIGKILL stops it
//	-child FILE          start a child in its group (holding stdout), write its pid to FILE
//	-setsid-child FILE   start a child in a session of its own (holding stdout), pid to FILE
//	-idle                print nothing and run until signalled (what the children run)
//	-exit-code N         print a line to stderr, then exit N before printing anything
//	-hang-at-start       print nothing and run until killed or SIGTERM (a hung start)
//	-die-after-calls N   exit 5 50ms after serving N testpb.Test calls (any kind)
//	-leak-per-call N     keep N more bytes of memory (touched, so resident) per unary testpb.Test call
//	-max-conn-age D      drain each connection after D (GOAWAY "max_age"), as keepalive.ServerParameters does
//	-max-conn-age-grace D  then close it D later, cutting the calls still in it
//	-collect-answer-after N  Collect answers and ends once it has N messages, without waiting for CloseSend
//	-collect-refuse-after N  Collect ends with Unavailable and grpc-go's transport text once it has N messages, before any header
//	-echo-end-after N    Echo ends with Aborted (trailer "echoed: N") once it has answered N messages, journaling "<id>/ended"
//	-header-pid          Watch, Collect and Echo send a header "pid: <pid>" before anything else
//	-no-ledger           keep no ledger (package ledger), even if the host gives one
//	-ledger-kill-at P    SIGKILL itself at point P of a recorded call (see ledger.go)
//	-ledger-kill-once F  ... only if F can be created, so that its successors live
//	-ledger-resolve      resolve an interrupted Append from the journal, an Upload from the object store
//	-upload-kill-after N SIGKILL itself in Upload's handler after N chunks
//	-ledger-max-response N  the ledger's Config.MaxResponse
//	-ledger-child-first  a child of this binary opens the ledger first
//	-ledger-precreate-next  make the successor's ledger file, empty
//	-ledger-exec-after-open  open the ledger, then exec itself without it
//
// The socket's dir is created under $PLUGIN_UNIX_SOCKET_DIR if that is set
// (as go-plugin servers do), else under the temp dir.
//
// It never touches its process group, so it behaves the same whether or not
// the host starts it in a group of its own.
package main

import (
	"bytes"
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
	"google.golang.org/grpc/keepalive"

	"github.com/grpc-respawn/respawn/internal/testpb"
	"github.com/grpc-respawn/respawn/internal/testplugin"
)

// Exit codes, distinct so tests can tell the failure modes apart.
const (
	exitError      = 1
	exitAtStart    = 3
	exitAfterStart = 4
	exitAfterCalls = 5
)

// Flags added for the crash-loop tests.
var (
	exitCode      = flag.Int("exit-code", -1, "print a line to stderr, then exit with this code before printing anything")
	hangAtStart   = flag.Bool("hang-at-start", false, "print nothing and run until killed or SIGTERM")
	dieAfterCalls = flag.Int("die-after-calls", 0, "exit 5 50ms after serving this many testpb.Test calls")
	leakPerCall   = flag.Int("leak-per-call", 0, "keep this many more bytes resident per unary testpb.Test call (a leak)")
	maxConnAge    = flag.Duration("max-conn-age", 0, "drain each connection after this long (GOAWAY max_age)")
	maxAgeGrace   = flag.Duration("max-conn-age-grace", 0, "close a drained connection this long after its GOAWAY")
	answerAfter   = flag.Int64("collect-answer-after", 0, "Collect answers and ends once it has this many messages")
	refuseAfter   = flag.Int64("collect-refuse-after", 0, "Collect ends with Unavailable once it has this many messages")
	echoEndAfter  = flag.Int64("echo-end-after", 0, "Echo ends with Aborted once it has answered this many messages")
	headerPID     = flag.Bool("header-pid", false, "Watch, Collect and Echo send a header \"pid: <pid>\" first")
	emptyUnary    = flag.Bool("unary-interceptor", false, "serve with a unary interceptor that only calls the handler: what grpc-go's generated handlers cost once any interceptor is installed")
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
	dieOn := flag.String("die-on", "", "a Get for this `key` exits 2, as out of memory")
	printLine := flag.String("print", "", "print this `line` instead of the address, then run until signalled")
	hugeLine := flag.Int("huge-line", 0, "print this many bytes without a newline, then run until signalled")
	fixedSocket := flag.String("socket", "", "listen on this fixed `path`, unlinking a stale socket first")
	ignoreTerm := flag.Bool("ignore-sigterm", false, "ignore SIGTERM and SIGINT")
	childFile := flag.String("child", "", "start a child in the plugin's group and write its pid to this `file`")
	setsidFile := flag.String("setsid-child", "", "start a child in a session of its own and write its pid to this `file`")
	hungHealth := flag.Bool("hung-health", false, "block every health check until the process ends: a deadlock")
	busyHealth := flag.Duration("busy-health", 0, "spin a CPU this long in each health check before answering: busy but alive")
	idle := flag.Bool("idle", false, "print nothing and run until signalled")
	closeStdout := flag.Bool("close-stdout", false, "close stdout without printing anything, then run until signalled")
	chatter := flag.Int("chatter", 0, "after printing the address, write this many bytes to stdout and to stderr, then the line \"chatter done\" to stderr, before serving")
	flag.Parse()
	log.SetOutput(os.Stderr)
	log.SetPrefix(fmt.Sprintf("testplugin[%d] ", os.Getpid()))

	if *atStart {
		os.Exit(exitAtStart)
	}
	if *exitCode >= 0 {
		log.Printf("exiting with code %d as asked (-exit-code)", *exitCode)
		os.Exit(*exitCode)
	}
	// Register for signals before anything slow, so a SIGTERM during the
	// start delay still leads to a clean exit.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if *ignoreTerm {
		stop()
		signal.Ignore(syscall.SIGTERM, syscall.SIGINT)
		ctx = context.Background()
	}
	if *idle {
		<-ctx.Done()
		return
	}
	if *ledgerOpen {
		openLedgerChild(ctx)
		return
	}
	if *closeStdout {
		if err := os.Stdout.Close(); err != nil {
			log.Print(err)
		}
		<-ctx.Done()
		return
	}
	if err := startChildren(*childFile, *setsidFile); err != nil {
		log.Print(err)
		os.Exit(exitError)
	}
	switch {
	case *printLine != "":
		fmt.Println(*printLine)
		waitForever(ctx)
		return
	case *hugeLine > 0:
		if _, err := os.Stdout.Write(bytes.Repeat([]byte{'x'}, *hugeLine)); err != nil {
			log.Print(err)
		}
		waitForever(ctx)
		return
	}

	if *startDelay > 0 {
		select {
		case <-time.After(*startDelay):
		case <-ctx.Done():
			return
		}
	}
	if *hangAtStart {
		<-ctx.Done()
		return
	}
	if *garbage {
		fmt.Println("this is not an address")
		<-ctx.Done()
		return
	}
	srv := testplugin.New(*journal)
	srv.DieOn = *dieOn
	srv.BusyHealth = *busyHealth
	srv.HungHealth = *hungHealth
	srv.CollectAnswerAfter, srv.CollectRefuseAfter, srv.HeaderPID = *answerAfter, *refuseAfter, *headerPID
	srv.EchoEndAfter = *echoEndAfter
	if *upstream != "" {
		cc, err := grpc.NewClient(*upstream, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			log.Fatal(err)
		}
		defer cc.Close()
		srv.Upstream = testpb.NewTestClient(cc)
	}
	// Before the address is printed, as a plugin's main makes its server: the
	// ledger file exists by the time the host can call.
	ledgerOpts = ledgerOptions(srv, *journal)
	if err := run(ctx, srv, *afterStart, !*noHealth, *fixedSocket, *chatter); err != nil {
		log.Print(err)
		os.Exit(exitError)
	}
}

// ledgerOpts is the plugin's ledger (ledgerOptions).
var ledgerOpts []grpc.ServerOption

// run listens, prints the address and serves until ctx ends.
func run(ctx context.Context, srv *testplugin.Server, exitAfterPrint, withHealth bool, fixedSocket string, chatter int) error {
	dir, err := os.MkdirTemp(os.Getenv("PLUGIN_UNIX_SOCKET_DIR"), "respawn-testplugin-")
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
	if fixedSocket != "" {
		// What many plugins do: a well-known path, and a stale socket left
		// by a predecessor that was killed is unlinked before binding.
		sock = fixedSocket
		if fi, err := os.Lstat(sock); err == nil && fi.Mode()&os.ModeSocket != 0 {
			_ = os.Remove(sock)
		}
	}
	lis, err := net.Listen("unix", sock)
	if err != nil {
		return err
	}
	defer lis.Close()

	if _, err := fmt.Printf("unix://%s\n", sock); err != nil {
		return fmt.Errorf("print address: %w", err)
	}
	if chatter > 0 {
		// A host that stops reading either pipe blocks these writes, and
		// the plugin never serves.
		junk := bytes.Repeat([]byte("chatter\n"), chatter/8+1)[:chatter]
		if _, err := os.Stdout.Write(junk); err != nil {
			return err
		}
		if _, err := os.Stderr.Write(junk); err != nil {
			return err
		}
		fmt.Fprintln(os.Stderr, "chatter done")
	}
	if exitAfterPrint {
		lis.Close()
		os.RemoveAll(dir) // os.Exit skips deferred calls
		os.Exit(exitAfterStart)
	}

	sopts := append(dieAfter(*dieAfterCalls), leak(*leakPerCall)...)
	sopts = append(sopts, ledgerOpts...)
	if *emptyUnary {
		sopts = append(sopts, grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			return h(ctx, req)
		}))
	}
	if *maxConnAge > 0 {
		sopts = append(sopts, grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionAge: *maxConnAge, MaxConnectionAgeGrace: *maxAgeGrace}))
	}
	s := grpc.NewServer(sopts...)
	var hs *health.Server
	if withHealth {
		hs = testplugin.Register(s, srv)
	} else {
		testpb.RegisterTestServer(s, srv)
	}
	testplugin.RegisterUsage(s)

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

// waitForever waits until ctx ends (forever with -ignore-sigterm).
func waitForever(ctx context.Context) {
	<-ctx.Done()
}
