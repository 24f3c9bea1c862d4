package ledger

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/grpc-respawn/respawn/internal/ledgerwire"
	"github.com/grpc-respawn/respawn/internal/ownrpc"
	"github.com/grpc-respawn/respawn/internal/protoidem"
)

// ServerOption returns the one grpc.ServerOption (a chained unary
// interceptor, grpc.ChainUnaryInterceptor, so it composes with the
// plugin's own) that keeps the ledger in the file named by the
// environment variable RESPAWN_LEDGER, which respawn's host sets for every
// launch. It creates that file; the host takes its existence as the plugin
// saying it keeps a ledger.
//
// It returns grpc.EmptyServerOption{} when the plugin was not launched
// with RESPAWN_LEDGER (a host without the ledger, or a plain process), and
// when the file cannot be created (then it says why in one line on
// stderr): the plugin then serves as it would without the ledger.
//
// Call it once per process: a second call finds the file made and turns
// the ledger off for the server it is given to. The interceptor is safe
// for concurrent use; it starts no goroutine.
func ServerOption(c Config) grpc.ServerOption {
	path, ok := os.LookupEnv(ledgerwire.Env)
	if !ok || path == "" {
		return grpc.EmptyServerOption{}
	}
	l, err := open(path, c.normalise())
	if err != nil {
		fmt.Fprintf(os.Stderr, "ledger: off, calls are not recorded: %v\n", err)
		return grpc.EmptyServerOption{}
	}
	return grpc.ChainUnaryInterceptor(l.intercept)
}

// ledger is one plugin's ledger: its own file, its calls in flight, and
// the index of its directory's files that retries read.
type ledger struct {
	cfg  config
	path string
	dir  string

	mu   sync.Mutex // one write at a time, so that records never interleave
	f    *os.File
	link func() bool // whether f still has a name (its directory was not removed); safe for concurrent use

	flightMu sync.Mutex
	flight   map[string]struct{} // call ids in flight in this process

	idx index

	warned atomic.Bool // a completed record could not be written; said once
}

// open creates the ledger file at path: it must not exist yet, in a
// directory only its owner can enter.
func open(path string, c config) (*ledger, error) {
	if !ledgerwire.ValidPath(path) {
		return nil, fmt.Errorf("%s=%q is not an absolute, clean path to a ledger file", ledgerwire.Env, path)
	}
	dir := filepath.Dir(path)
	if err := privateDir(dir); err != nil {
		return nil, err
	}
	f, link, err := create(path)
	if err != nil {
		return nil, err
	}
	return &ledger{
		cfg:    c,
		path:   path,
		dir:    dir,
		f:      f,
		link:   link,
		flight: make(map[string]struct{}),
		idx:    index{dir: dir},
	}, nil
}

func (l *ledger) close() error {
	l.idx.close()
	return l.f.Close()
}

func (l *ledger) intercept(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	method := info.FullMethod
	if ownrpc.Instance(method) || protoidem.Idempotent(method) {
		return handler(ctx, req)
	}
	ids := metadata.ValueFromIncomingContext(ctx, ledgerwire.CallIDKey)
	if len(ids) == 0 || ids[0] == "" {
		return handler(ctx, req)
	}
	id := ids[0]
	if len(id) > ledgerwire.MaxCallID {
		return nil, status.Errorf(codes.InvalidArgument, "ledger: call id of %s is %d bytes long, over %d: not run", method, len(id), ledgerwire.MaxCallID)
	}
	if !l.enter(id) {
		return nil, status.Errorf(codes.Aborted, "ledger: call %s of %s is already running in this plugin; not run twice", id, method)
	}
	defer l.leave(id)
	if len(metadata.ValueFromIncomingContext(ctx, ledgerwire.AttemptKey)) > 0 {
		if resp, answered, err := l.answer(ctx, method, id, req); answered {
			return resp, err
		}
	}
	return l.run(ctx, method, id, req, handler)
}

// enter marks id in flight, unless it is already.
func (l *ledger) enter(id string) bool {
	l.flightMu.Lock()
	defer l.flightMu.Unlock()
	if _, dup := l.flight[id]; dup {
		return false
	}
	l.flight[id] = struct{}{}
	return true
}

func (l *ledger) leave(id string) {
	l.flightMu.Lock()
	delete(l.flight, id)
	l.flightMu.Unlock()
}

// run runs a call the ledgers have no answer for, between its records.
func (l *ledger) run(ctx context.Context, method, id string, req any, handler grpc.UnaryHandler) (any, error) {
	at(ledgerwire.BeforeStarted)
	bp := getBuf()
	*bp = appendStarted((*bp)[:0], id, method)
	err := l.write(*bp, true)
	putBuf(bp)
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "ledger: cannot record the call, so it was not run: %v", err)
	}
	at(ledgerwire.AfterStarted)
	resp, herr := handler(ctx, req)
	at(ledgerwire.AfterHandler)
	l.complete(method, id, resp, herr)
	at(ledgerwire.AfterCompleted)
	return resp, herr
}

// complete records the outcome of a call. A failure to record does not
// change the answer: the call ran. Its retry after this plugin's death
// finds it started and not completed, so it is not run again.
func (l *ledger) complete(method, id string, resp any, herr error) {
	bp := getBuf()
	*bp = l.appendCompleted((*bp)[:0], id, method, resp, herr)
	err := l.write(*bp, false)
	putBuf(bp)
	if err != nil && l.warned.CompareAndSwap(false, true) {
		fmt.Fprintf(os.Stderr, "ledger: cannot record calls' outcomes in %s (their retries will be told they were interrupted): %v\n", l.path, err)
	}
}

// errUnlinked: the ledger file has no name any more, so no successor can
// read what it holds.
var errUnlinked = errors.New("the ledger file was removed")

// write writes one record. A started record first checks that the file
// still has a name: a record written to a removed file survives nothing,
// and a call must not run unrecorded.
func (l *ledger) write(b []byte, started bool) error {
	if started && !l.link() {
		return fmt.Errorf("%s: %w", l.path, errUnlinked)
	}
	l.mu.Lock()
	n, err := l.f.Write(b)
	l.mu.Unlock()
	if err == nil && n != len(b) {
		err = io.ErrShortWrite
	}
	if err == nil && l.cfg.sync {
		err = l.f.Sync()
	}
	return err
}

func at(p ledgerwire.Point) {
	if f := ledgerwire.At; f != nil {
		f(p)
	}
}

// bufs holds record buffers; one grows to the largest record written.
var bufs = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

func getBuf() *[]byte { return bufs.Get().(*[]byte) }

// putBuf returns bp to the pool unless it grew past what a usual record
// needs, so that one large response does not stay in memory for good.
func putBuf(bp *[]byte) {
	if cap(*bp) <= 64<<10 {
		bufs.Put(bp)
	}
}
