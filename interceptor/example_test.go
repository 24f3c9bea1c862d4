//go:build unix

package interceptor_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/grpc-respawn/respawn/interceptor"
	"github.com/grpc-respawn/respawn/internal/plugintest"
	"github.com/grpc-respawn/respawn/internal/testpb"
	"github.com/grpc-respawn/respawn/redial"
)

// The plugin is SIGKILLed, as the OOM killer would, while each call is in
// its handler. Get (idempotency_level NO_SIDE_EFFECTS) is retried on a new
// plugin and succeeds. Append declares nothing, so it may have run: it
// fails with ErrOutcomeUnknown rather than run twice, and the next call
// finds a new plugin. Idempotent(true) lets one Append be retried.
func Example() {
	dir, err := os.MkdirTemp("", "interceptor-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	bin, err := plugintest.Build(dir) // a real host knows its plugin's path
	if err != nil {
		log.Fatal(err)
	}
	journal := filepath.Join(dir, "journal") // where the plugin records each call

	rc, err := redial.New(&redial.Command{Path: bin, Args: []string{"-journal", journal}},
		redial.WithPolicy(interceptor.New()))
	if err != nil {
		log.Fatal(err)
	}
	defer rc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	client := testpb.NewTestClient(rc)

	_, err = killedMidCall(ctx, rc, journal, "get", func() error {
		_, err := client.Get(ctx, &testpb.GetRequest{Id: "get", DelayMs: 1000})
		return err
	})
	fmt.Println("Get:", err)

	runs, err := killedMidCall(ctx, rc, journal, "append-1", func() error {
		_, err := client.Append(ctx, &testpb.AppendRequest{Id: "append-1", DelayMs: 1000})
		return err
	})
	fmt.Println("Append: outcome unknown:", errors.Is(err, interceptor.ErrOutcomeUnknown), "ran", runs, "time")

	runs, err = killedMidCall(ctx, rc, journal, "append-2", func() error {
		_, err := client.Append(ctx, &testpb.AppendRequest{Id: "append-2", DelayMs: 1000}, interceptor.Idempotent(true))
		return err
	})
	fmt.Println("Append, Idempotent(true):", err, "ran", runs, "times")
	fmt.Println("plugins started:", rc.Current().Number())
	// Output:
	// Get: <nil>
	// Append: outcome unknown: true ran 1 time
	// Append, Idempotent(true): <nil> ran 2 times
	// plugins started: 4
}

// killedMidCall runs call, SIGKILLs the plugin once id is in its handler, and
// returns call's error and how many times id ran.
func killedMidCall(ctx context.Context, rc *redial.Conn, journal, id string, call func() error) (int, error) {
	errc := make(chan error, 1)
	go func() { errc <- call() }()
	if err := plugintest.WaitJournal(ctx, journal, func(j map[string]int) bool { return j[id] > 0 }); err != nil {
		log.Fatal(err)
	}
	p := rc.Current().Process()
	if err := syscall.Kill(p.PID(), syscall.SIGKILL); err != nil {
		log.Fatal(err)
	}
	err := <-errc
	j, jerr := plugintest.ReadJournal(journal)
	if jerr != nil {
		log.Fatal(jerr)
	}
	return j[id], err
}
