package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"google.golang.org/grpc"

	"github.com/grpc-respawn/respawn/internal/ledgerwire"
	"github.com/grpc-respawn/respawn/internal/testpb"
	"github.com/grpc-respawn/respawn/internal/testplugin"
	"github.com/grpc-respawn/respawn/ledger"
)

var (
	noLedger      = flag.Bool("no-ledger", false, "do not keep a ledger, even if the host gives one (RESPAWN_LEDGER)")
	ledgerKillAt  = flag.String("ledger-kill-at", "", "SIGKILL this process at this `point` of a recorded call: before-started, after-started, handler (in Append, once journaled), after-handler, after-completed")
	ledgerOnce    = flag.String("ledger-kill-once", "", "kill at -ledger-kill-at only if this `file` can be created: one plugin of a Conn dies there, its successors do not")
	ledgerResolve = flag.Bool("ledger-resolve", false, "resolve an Append interrupted in its handler from the journal (it ran if the journal has its call id, else run it now), and an Upload from the object store")
	ledgerMax     = flag.Int("ledger-max-response", 0, "the ledger's Config.MaxResponse")
	ledgerChild   = flag.Bool("ledger-child-first", false, "before opening the ledger, start a child of this binary that opens it (-ledger-open-child), and wait until it has")
	ledgerOpen    = flag.Bool("ledger-open-child", false, "open the ledger the environment names, print \"opened\", and run until signalled")
	ledgerNext    = flag.Bool("ledger-precreate-next", false, "once the ledger is open, make the file its successor's ledger would have, empty")
	uploadKill    = flag.Int("upload-kill-after", 0, "SIGKILL this process in Upload's handler once it has received this many chunks (with -ledger-kill-once)")
	ledgerExec    = flag.Bool("ledger-exec-after-open", false, "once the ledger is open, exec this binary again, in the same process, without this flag: the program that serves keeps no ledger")
)

// ledgerOptions returns the plugin's ledger, as a plugin author adds it, with
// the kill point and resolver the flags ask for.
func ledgerOptions(srv *testplugin.Server, journal string) []grpc.ServerOption {
	if *noLedger {
		return nil
	}
	points := map[string]ledgerwire.Point{
		"before-started":  ledgerwire.BeforeStarted,
		"after-started":   ledgerwire.AfterStarted,
		"after-handler":   ledgerwire.AfterHandler,
		"after-completed": ledgerwire.AfterCompleted,
	}
	switch p, ok := points[*ledgerKillAt]; {
	case ok:
		ledgerwire.At = func(at ledgerwire.Point) {
			if at == p {
				killSelf()
			}
		}
	case *ledgerKillAt == "handler":
		srv.InAppend = killSelf
	case *ledgerKillAt != "":
		log.Fatalf("-ledger-kill-at %q: no such point", *ledgerKillAt)
	}
	if *uploadKill > 0 {
		srv.InUpload = func(chunks int) {
			if chunks == *uploadKill {
				killSelf()
			}
		}
	}
	if *ledgerChild {
		childOpensLedger()
	}
	given := os.Getenv(ledgerwire.Env)
	defer func() {
		if *ledgerNext && given != "" {
			precreateNext(given)
		}
	}()
	cfg := ledger.Config{MaxResponse: *ledgerMax}
	if *ledgerResolve {
		cfg.Resolvers = map[string]func(context.Context, string, string, any) (any, bool){
			testpb.Test_Append_FullMethodName: func(ctx context.Context, _, callID string, req any) (any, bool) {
				return resolveAppend(ctx, srv, journal, callID, req)
			},
		}
		cfg.StreamResolvers = map[string]ledger.StreamResolver{
			testpb.Test_Upload_FullMethodName: func(_ context.Context, _ string, u ledger.Upload) (any, ledger.Resolution) {
				return resolveUpload(journal, u)
			},
		}
	}
	opts := ledger.ServerOptions(cfg)
	if *ledgerExec {
		execAgain()
	}
	return opts
}

// execAgain execs this binary in this process, with its arguments but
// -ledger-exec-after-open: a plugin that opens its ledger and then
// replaces its program.
func execAgain() {
	self, err := os.Executable()
	if err != nil {
		log.Fatal(err)
	}
	args := []string{os.Args[0]}
	for _, a := range os.Args[1:] {
		if a != "-ledger-exec-after-open" {
			args = append(args, a)
		}
	}
	log.Fatal(syscall.Exec(self, args, os.Environ()))
}

// killSelf SIGKILLs this process, once per -ledger-kill-once file.
func killSelf() {
	if *ledgerOnce != "" {
		f, err := os.OpenFile(*ledgerOnce, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
		if err != nil {
			return // a plugin before this one died here
		}
		f.Close()
	}
	if self, err := os.FindProcess(os.Getpid()); err == nil {
		_ = self.Kill() // SIGKILL on Unix
	}
	select {} // the signal is on its way
}

// resolveAppend tells from the journal whether the Append with callID took
// effect, as a plugin asks its own store: it did if a replay line ("<id>
// <attempt> <call id>") has its call id and the journal has its request id
// (an execution: the replay line is written first, so a plugin killed
// between the two leaves the line of an Append that never ran), and the
// answer says so; if not, it did not, and it runs now.
func resolveAppend(ctx context.Context, srv *testplugin.Server, journal, callID string, req any) (any, bool) {
	r, ok := req.(*testpb.AppendRequest)
	if !ok {
		return nil, false
	}
	b, err := os.ReadFile(journal + testplugin.MetaSuffix)
	if err != nil && !os.IsNotExist(err) {
		return nil, false
	}
	for line := range strings.Lines(string(b)) {
		if f := strings.Fields(line); len(f) == 3 && f[2] == callID {
			ran, err := journaled(journal, r.GetId())
			if err != nil {
				return nil, false
			}
			if ran {
				return &testpb.AppendResponse{Pid: int64(os.Getpid()), Id: r.GetId()}, true
			}
			break
		}
	}
	resp, err := srv.Append(ctx, r)
	return resp, err == nil
}

// resolveUpload tells from the object store whether the upload u stored
// its object, as an object store would. Upload's store ends with its
// journal line (the object is renamed into place first, and a store cut
// between the two is done again whole): it did if the object under its key
// was stored by its call id, with the digest and length the host sent, and
// the journal has its id; it did not if there is no object of its call id
// under its key, or the journal does not have its id. An object of its
// call id whose digest or length differ cannot be told.
func resolveUpload(journal string, u ledger.Upload) (any, ledger.Resolution) {
	first, ok := u.First.(*testpb.UploadRequest)
	if !ok {
		return nil, ledger.Unresolved
	}
	o, found, err := testplugin.StoredObject(journal, first.GetKey())
	if err != nil {
		return nil, ledger.Unresolved
	}
	done, err := journaled(journal, first.GetId())
	switch {
	case err != nil:
		return nil, ledger.Unresolved
	case !found || o.CallID != u.CallID:
		if done {
			return nil, ledger.Unresolved // journaled, yet not stored by this call
		}
		return nil, ledger.NotDone
	case o.Digest != u.Digest || o.Length != u.Length:
		return nil, ledger.Unresolved
	case !done:
		return nil, ledger.NotDone // renamed into place, not journaled: stored again whole
	}
	return &testpb.UploadResponse{Pid: int64(os.Getpid()), Id: first.GetId(), Key: first.GetKey(), Size: o.Size, Sha256: o.SHA256}, ledger.Done
}

// journaled reports whether the journal has an execution of the request id.
func journaled(journal, id string) (bool, error) {
	b, err := os.ReadFile(journal)
	if os.IsNotExist(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	for line := range strings.Lines(string(b)) {
		if strings.TrimSuffix(line, "\n") == id {
			return true, nil
		}
	}
	return false, nil
}

// childOpensLedger starts this binary with -ledger-open-child, in the
// plugin's process group, and waits until it has opened the ledger: a
// plugin that starts a helper of its own binary before it makes its
// server, the helper inheriting the environment.
func childOpensLedger() {
	self, err := os.Executable()
	if err != nil {
		log.Fatal(err)
	}
	cmd := exec.Command(self, "-ledger-open-child")
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		log.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		log.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || line != "opened\n" {
		log.Fatalf("-ledger-child-first: the child said %q, %v", line, err)
	}
}

// openLedgerChild is -ledger-open-child: it opens the ledger, says so, and
// runs until ctx ends.
func openLedgerChild(ctx context.Context) {
	_ = ledger.ServerOptions(ledger.Config{})
	fmt.Println("opened")
	<-ctx.Done()
}

// precreateNext makes, empty, the file named as the successor's ledger of
// the plugin whose ledger is at path: a plugin that takes its successor's
// file.
func precreateNext(path string) {
	n, err := strconv.ParseUint(strings.TrimSuffix(filepath.Base(path), ".ledger"), 10, 64)
	if err != nil {
		log.Fatal(err)
	}
	next := filepath.Join(filepath.Dir(path), ledgerwire.FileName(n+1))
	if err := os.WriteFile(next, nil, 0o600); err != nil {
		log.Printf("-ledger-precreate-next: %v", err)
	}
}
