// Command leaderexitplugin is a test plugin whose main thread exits
// (pthread_exit) once it serves, while its other threads go on serving
// respawn's test service: its process is a zombie thread-group leader
// (State Z in /proc/<pid>/status) that lives. It needs cgo.
package main

/*
#include <pthread.h>
static void exit_main_thread(void) { pthread_exit(NULL); }
*/
import "C"

import (
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"syscall"

	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"

	"github.com/grpc-respawn/respawn/internal/testplugin"
)

// init locks main to the process's main thread, the thread group's
// leader: the thread exit_main_thread ends.
func init() { runtime.LockOSThread() }

func main() {
	journal := flag.String("journal", "", "file where each call records its id (`path`)")
	maxConnAge := flag.Duration("max-conn-age", 0, "drain each connection after this long (GOAWAY max_age)")
	maxAgeGrace := flag.Duration("max-conn-age-grace", 0, "close a drained connection this long after its GOAWAY")
	flag.Parse()

	dir, err := os.MkdirTemp(os.Getenv("PLUGIN_UNIX_SOCKET_DIR"), "respawn-leaderexitplugin-")
	if err != nil {
		log.Fatal(err)
	}
	sock := filepath.Join(dir, "plugin.sock")
	lis, err := net.Listen("unix", sock)
	if err != nil {
		log.Fatal(err)
	}
	var sopts []grpc.ServerOption
	if *maxConnAge > 0 {
		sopts = append(sopts, grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionAge: *maxConnAge, MaxConnectionAgeGrace: *maxAgeGrace}))
	}
	s := grpc.NewServer(sopts...)
	testplugin.Register(s, testplugin.New(*journal))
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-stop
		s.Stop()
		_ = os.RemoveAll(dir)
		os.Exit(0)
	}()
	go func() {
		if err := s.Serve(lis); err != nil {
			_ = os.RemoveAll(dir)
			log.Fatalf("serve: %v", err)
		}
	}()
	if _, err := fmt.Printf("unix://%s\n", sock); err != nil {
		log.Fatal(err)
	}
	// The other threads serve on; main never returns, so the process ends
	// only when they do, by a signal or a failed Serve.
	C.exit_main_thread()
}
