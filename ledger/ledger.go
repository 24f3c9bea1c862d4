package ledger

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/grpc-respawn/respawn/internal/ledgerwire"
	"github.com/grpc-respawn/respawn/internal/ownrpc"
)

// ServerOptions returns the grpc.ServerOptions (a chained unary and a
// chained stream interceptor, grpc.ChainUnaryInterceptor and
// grpc.ChainStreamInterceptor, so they compose with the plugin's own)
// that keep the ledger in the file named by the environment variable
// RESPAWN_LEDGER, which respawn's host makes, empty, for every launch. It
// opens that file and writes first in it the launch's key
// (RESPAWN_LEDGER_KEY, given to this launch only) and this process's pid:
// the host takes the file for the ledger of the plugin it launched only if
// its first record holds both.
//
// It returns no options (nil) when the plugin was not launched with
// RESPAWN_LEDGER (a host without the ledger, or a plain process), and when
// the file cannot be opened or was written already (then it says why in
// one line on stderr): the plugin then serves as it would without the
// ledger, and the host knows it.
//
// Give the option to the server that serves the plugin, in the program
// that serves it: the host takes the opened record for the evidence that
// the plugin records its calls, and cannot tell an option left unused.
// Call it before the server listens (in a go-plugin plugin, GRPCServer is
// called before the handshake), and before the plugin starts any process
// of its own binary: a process started before inherits both variables,
// and if it opens the file first, the plugin keeps no ledger. It reads
// the variables once and removes them from the process's environment, so
// that a process the plugin starts afterwards does not take the plugin's
// file for its own. Calls after the first return the same options, with
// the first call's Config. The interceptors are safe for concurrent use;
// they start no goroutine.
func ServerOptions(c Config) []grpc.ServerOption {
	opened.Lock()
	defer opened.Unlock()
	path, ok := os.LookupEnv(ledgerwire.Env)
	key := os.Getenv(ledgerwire.KeyEnv)
	_ = os.Unsetenv(ledgerwire.KeyEnv)
	if !ok || path == "" {
		return opened.last
	}
	_ = os.Unsetenv(ledgerwire.Env)
	l, err := open(path, key, c.normalise())
	if err != nil {
		fmt.Fprintf(os.Stderr, "ledger: off, calls are not recorded: %v\n", err)
		return nil
	}
	opened.last = []grpc.ServerOption{grpc.ChainUnaryInterceptor(l.intercept), grpc.ChainStreamInterceptor(l.interceptStream)}
	return opened.last
}

// opened is the options of the ledger this process opened last.
var opened struct {
	sync.Mutex
	last []grpc.ServerOption
}

// ledger is one plugin's ledger: its own file, its calls in flight, and
// the index of its directory's files that retries read.
type ledger struct {
	cfg  config
	path string
	dir  string

	mu   sync.Mutex // one write at a time, so that records never interleave
	f    *os.File
	m    *mapping // f's mapping, where records are stored; nil: written with write(2)
	size int64    // of f, all of it whole records, when m is nil
	// broken: a write failed part way and the file could not be cut back
	// to its last whole record, or the file was cut short under its
	// mapping; nothing is recorded after it.
	broken error

	flightMu sync.Mutex
	flight   map[string]struct{} // call ids in flight in this process

	idx index

	warned atomic.Bool // a completed record could not be written; said once
}

// open opens the ledger file at path, which the host made, empty, in a
// directory only its owner can enter, and writes its opened record.
func open(path, key string, c config) (*ledger, error) {
	if !ledgerwire.ValidPath(path) {
		return nil, fmt.Errorf("%s=%q is not an absolute, clean path to a ledger file", ledgerwire.Env, path)
	}
	if !ledgerwire.ValidKey(key) {
		return nil, fmt.Errorf("%s is not set to a ledger key", ledgerwire.KeyEnv)
	}
	dir := filepath.Dir(path)
	if err := privateDir(dir); err != nil {
		return nil, err
	}
	f, err := openGiven(path)
	if err != nil {
		return nil, err
	}
	m, err := mapFile(f, path)
	if err != nil {
		_ = f.Close()
		return nil, err
	}
	l := &ledger{
		cfg:    c,
		path:   path,
		dir:    dir,
		f:      f,
		m:      m,
		flight: make(map[string]struct{}),
		idx:    index{dir: dir},
	}
	if err := l.write(ledgerwire.AppendOpened(nil, key, os.Getpid())); err != nil {
		m.close()
		_ = f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return l, nil
}

func (l *ledger) intercept(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	method := info.FullMethod
	if ownrpc.Instance(method) {
		return handler(ctx, req)
	}
	id, recorded, err := callID(ctx, method)
	if !recorded {
		return handler(ctx, req)
	}
	if err != nil {
		return nil, err
	}
	if !l.enter(id) {
		return nil, status.Errorf(codes.Aborted, "ledger: call %s of %s is already running in this plugin; not run twice", id, method)
	}
	defer l.leave(id)
	if files, retry, err := l.retryFiles(ctx, method); err != nil {
		return nil, err
	} else if retry {
		if resp, answered, err := l.answer(ctx, method, id, req, files); answered {
			return resp, err
		}
		if err := ctx.Err(); err != nil {
			// Its caller gave up while the ledgers were read: not run.
			return nil, status.FromContextError(err).Err()
		}
	}
	return l.run(ctx, method, id, req, handler)
}

// callID returns the ledger id of a call of method whose server ctx is
// ctx: recorded is false for a call that carries none (it is not
// recorded), and err is set for one whose ids are not valid (it is not
// run).
func callID(ctx context.Context, method string) (id string, recorded bool, err error) {
	ids := metadata.ValueFromIncomingContext(ctx, ledgerwire.IDKey)
	switch {
	case len(ids) == 0 || ids[0] == "":
		return "", false, nil
	case len(ids) > 1:
		return "", true, status.Errorf(codes.InvalidArgument, "ledger: %s carries %d ledger ids: not run", method, len(ids))
	case len(ids[0]) > ledgerwire.MaxCallID:
		return "", true, status.Errorf(codes.InvalidArgument, "ledger: call id of %s is %d bytes long, over %d: not run", method, len(ids[0]), ledgerwire.MaxCallID)
	}
	return ids[0], true, nil
}

// retryFiles returns the dead plugins' ledger files that a retry of
// method names, comma-separated; retry is false if the call is none. The host
// names only dead plugins' files; one that names this plugin's own was
// not sent by it (forwarded metadata): an error, unrun.
func (l *ledger) retryFiles(ctx context.Context, method string) (files string, retry bool, err error) {
	v := metadata.ValueFromIncomingContext(ctx, ledgerwire.RetryKey)
	switch {
	case len(v) == 0:
		return "", false, nil
	case len(v) > 1 || l.namesOwn(v[0]):
		setTrailer(ctx, ledgerwire.Unreadable)
		return "", true, status.Errorf(codes.InvalidArgument, "ledger: a retry of %s names this plugin's own ledger, or names ledgers twice: not run", method)
	}
	return v[0], true, nil
}

// namesOwn reports whether files, a retry's comma-separated names, names
// this plugin's own file.
func (l *ledger) namesOwn(files string) bool {
	own := filepath.Base(l.path)
	for name := range strings.SplitSeq(files, ",") {
		if name == own {
			return true
		}
	}
	return false
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
	if err := l.start(method, id); err != nil {
		return nil, err
	}
	resp, herr := handler(ctx, req)
	at(ledgerwire.AfterHandler)
	l.complete(method, id, resp, herr)
	at(ledgerwire.AfterCompleted)
	return resp, herr
}

// start records that a call starts, between the points BeforeStarted and
// AfterStarted. A call whose started record cannot be written is not run.
func (l *ledger) start(method, id string) error {
	at(ledgerwire.BeforeStarted)
	bp := getBuf()
	*bp = appendStarted((*bp)[:0], id, method)
	err := l.write(*bp)
	putBuf(bp)
	if err != nil {
		return status.Errorf(codes.Unavailable, "ledger: cannot record the call, so it was not run: %v", err)
	}
	at(ledgerwire.AfterStarted)
	return nil
}

// complete records the outcome of a call. A failure to record does not
// change the answer: the call ran. Its retry after this plugin's death
// finds it started and not completed, so it is not run again.
func (l *ledger) complete(method, id string, resp any, herr error) {
	bp := getBuf()
	*bp = l.appendCompleted((*bp)[:0], id, method, resp, herr)
	err := l.write(*bp)
	putBuf(bp)
	if err != nil && l.warned.CompareAndSwap(false, true) {
		fmt.Fprintf(os.Stderr, "ledger: cannot record calls' outcomes in %s (their retries will be told they were interrupted): %v\n", l.path, err)
	}
}

// write records one frame: on Linux it stores it into the file's mapping
// (see mapping), elsewhere, or where the file system cannot preallocate
// or map the file, it writes it with one write(2). A write that fails part way
// would leave a torn frame in the middle of the file, behind which readers
// see nothing: the file is cut back to its last whole record, and if that
// fails too, nothing more is recorded (a started record then fails its
// call, unrun). With Config.Sync, the record is on the disk before write
// returns.
func (l *ledger) write(b []byte) error {
	l.mu.Lock()
	if l.broken != nil {
		l.mu.Unlock()
		return l.broken
	}
	if l.m != nil {
		defer l.mu.Unlock()
		off := l.m.size
		err, broken := l.m.store(l.f, l.path, b)
		if broken != nil {
			l.broken = broken
		}
		if err == nil && l.cfg.sync {
			// Under the lock: the mapping moves when the file grows.
			err = l.m.sync(l.path, off)
		}
		return err
	}
	n, err := l.f.Write(b)
	if err == nil && n != len(b) {
		err = io.ErrShortWrite
	}
	if err != nil {
		if n > 0 {
			if terr := l.f.Truncate(l.size); terr != nil {
				l.broken = fmt.Errorf("%s: a record was torn by %v, and the file could not be cut back: %w", l.path, err, terr)
			}
		}
		l.mu.Unlock()
		return err
	}
	l.size += int64(n)
	l.mu.Unlock()
	if l.cfg.sync {
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
