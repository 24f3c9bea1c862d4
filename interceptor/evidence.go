package interceptor

import (
	"context"
	"errors"
	"reflect"
	"runtime"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/grpc-respawn/respawn/redial"
)

// evidence is what happened to the plugin a failed attempt was sent to,
// besides the attempt's error. It is gathered on the error path only.
type evidence struct {
	exited bool // the plugin's process has exited, or is dying (redial.Process.Await)
	lost   bool // its connection left READY, or was closed under the attempt
	// drained: the plugin sent a GOAWAY, and then took a new connection
	// while its process lived: it is alive.
	drained bool
	// reached says whether the attempt reached a transport: known for
	// respawn's own retries, which carry grpc.Peer, and for a first attempt
	// that grpc-go itself failed before it picked one (unpicked).
	reached reach
	// gaveUp: the caller's ctx ended before the evidence was in.
	gaveUp bool
}

type reach int8

const (
	reachUnknown reach = iota
	reachYes
	reachNo
)

func (e evidence) dead() bool { return e.exited || e.lost }

// outcome is the verdict on a failed attempt.
type outcome struct {
	class faultClass
	// live: do not replace the plugin; retry on it if the call is retried.
	// It refused or drained the call and lives (GOAWAY), or the caller's ctx
	// ended before any evidence of its death came.
	live bool
	// killed: the plugin died with the call in it, so the call may be what
	// killed it (a poison request).
	killed bool
}

// decide is the classifier: the table's rule for err, confirmed or
// overruled by ev. A status from a live plugin on a live transport is the
// plugin's own, whatever its code and text. An attempt whose caller gave up
// before the evidence was in, with no exit seen, failed with one of
// grpc-go's texts: that text says the call may have run, unless it is
// known never to have left the host; and nothing proves the plugin died,
// not even a connection lost after a GOAWAY, whose reconnect was not
// waited for.
func decide(err error, ev evidence) outcome {
	r, known, ok := lookup(err)
	o := decideRule(err, ev, r, known, ok)
	if ev.gaveUp && known && !ev.exited {
		switch {
		case o.class == notConnectionFault && !(r.class == neverSent && ev.reached == reachNo),
			o.class == maybeProcessed && r.live:
			return outcome{class: maybeProcessed, live: true}
		}
	}
	return o
}

// decideRule is decide's verdict from the rule r that err matches (known:
// one of the table's texts; ok: a status a failed connection produces)
// and the evidence, the caller's giving up aside.
func decideRule(err error, ev evidence, r rule, known, ok bool) outcome {
	switch {
	case err == nil || isOurVerdict(err) || !ok:
		return outcome{}
	case (r.live || err == errStreamEnded) && ev.drained && !ev.exited:
		// It refused the call unprocessed, or cut it after taking it; a
		// process that exited after its reconnect is dead all the same. A
		// stream that ended under SendMsg on a connection that was lost,
		// to a plugin that takes a new one, was drained too (GOAWAY).
		return outcome{class: r.class, live: true}
	case !ev.dead():
		return outcome{}
	case r.live && r.class == neverSent && !ev.exited:
		return outcome{class: neverSent, live: true}
	case known && ev.reached == reachNo:
		// One of grpc-go's texts on an attempt that reached no transport.
		return outcome{class: neverSent}
	}
	// Any other text, with evidence of a death, may have been processed: a
	// "connection refused" after the plugin died under the call may hide an
	// earlier attempt of a retry layer inside respawn that reached it.
	inFlight := ev.reached == reachYes || known && r.class == maybeProcessed
	return outcome{class: maybeProcessed, killed: ev.exited && inFlight}
}

// attempt is one try of a call on a generation: the first (on the caller's
// ctx, without grpc.Peer, so that a successful call costs nothing) or a
// retry (on actx, which ends when the plugin's process exits, with a peer).
type attempt struct {
	g    *redial.Generation
	actx context.Context // nil for the first attempt
	pr   *peer.Peer      // nil for the first attempt
	// direct: the first attempt was made by grpc-go's own invoker or
	// streamer, with no interceptor between respawn's and grpc-go.
	direct bool
	// trailer, once the attempt has ended, gives the trailer metadata it
	// received: nil if unknown (a unary call's first attempt).
	trailer interface{ Trailer() metadata.MD }
	// released: redial closed g's connection with no transport under it
	// ([redial.Generation.Released]), so that its closing failed only calls
	// that were never sent.
	released bool
}

// firstByGRPC records how a, a call's first attempt, made by f, failed:
// whether f is grpc-go's own, and whether redial released a's connection.
func (a *attempt) firstByGRPC(h redial.Handle, f any) {
	a.direct = fromGRPC(f)
	a.released = a.direct && a.g != nil && a.g.Released()
}

// fromGRPC reports whether f, an invoker or a streamer, is grpc-go's own:
// respawn's interceptor is the last of its chain, so that a failure is that
// of grpc-go's one attempt, not the last of a retry layer's, which may hide
// an earlier one that reached the plugin. Called on the error path only.
func fromGRPC(f any) bool {
	fn := runtime.FuncForPC(reflect.ValueOf(f).Pointer())
	if fn == nil {
		return false
	}
	switch fn.Name() {
	case "google.golang.org/grpc.invoke", "google.golang.org/grpc.newClientStream":
		return true
	}
	return false
}

// unpicked reports whether err, from a first attempt made by grpc-go
// itself, says that the attempt never got a transport: a dial or picker
// failure (a never-sent row of the table), or the closing of a ClientConn
// that redial released (it had no transport left), which fails a call
// queued in the picker (WaitForReady) or one about to be; an open stream
// it ends fails in RecvMsg, not at its opening. The closing of a
// connection that still had a transport fails with the same text the
// unary calls in flight on it, which may have run.
func unpicked(err error, released bool) bool {
	r, known, _ := lookup(err)
	return known && (r.class == neverSent || released && r.code == codes.Canceled && r.text == clientConnClosing)
}

// clientConnClosing is the text of grpc-go's ErrClientConnClosing, a row
// of the table.
const clientConnClosing = "grpc: the client connection is closing"

// mdTrailer is a unary attempt's trailer, as its grpc.Trailer option
// filled it in.
type mdTrailer struct{ md *metadata.MD }

func (t mdTrailer) Trailer() metadata.MD { return *t.md }

// retryOptions returns opts for a stream's retry attempt: it waits for its
// plugin to be ready and records its peer in pr. A fresh slice per attempt,
// since grpc-go keeps it until the stream ends; opts stays as it is.
func retryOptions(opts []grpc.CallOption, pr *peer.Peer) []grpc.CallOption {
	return append(opts[:len(opts):len(opts)], grpc.WaitForReady(true), grpc.Peer(pr))
}

// judgeAttempt gathers the evidence about a failed attempt and decides. It
// returns the error to report too: an attempt cut short because its
// plugin's process exited fails with codes.Canceled from our own cancel of
// actx, and becomes the Unavailable it really is, since a caller must not
// read Canceled as "I gave up".
func (p *Policy) judgeAttempt(ctx context.Context, h redial.Handle, a attempt, err error) (outcome, error) {
	switch {
	case err == errGone:
		return outcome{class: neverSent}, err
	case answered(a) || fromPlugin.take(err):
		// The status came in the plugin's trailers (a trailers-only answer
		// always carries content-type; a failed transport gives none), as
		// the attempt's trailer or the load balancer (origin.go) says: it is
		// the plugin's own, from a live transport, whatever its text.
		return outcome{}, err
	}
	ev := evidence{}
	switch {
	case a.pr != nil:
		ev.reached = reachNo
		if a.pr.Addr != nil {
			ev.reached = reachYes
		}
	case a.direct && unpicked(err, a.released):
		ev.reached = reachNo
	}
	if a.actx != nil && ctx.Err() == nil && status.Code(err) == codes.Canceled && errors.Is(context.Cause(a.actx), errProcessExited) {
		err = status.Errorf(codes.Unavailable, "interceptor: plugin exited during the attempt: %s", status.Convert(err).Message())
		o := outcome{class: neverSent}
		if ev.reached == reachYes {
			o = outcome{class: maybeProcessed, killed: true}
		}
		return o, err
	}
	if r, known, ok := lookup(err); ok {
		if r.live && r.class == maybeProcessed {
			// A GOAWAY, then the connection closed: whether the plugin lives
			// is whether it takes a new one.
			ev.drained = reconnects(ctx, h, a.g, p.evidenceWait())
		}
		wait := time.Duration(0)
		if known || err == errStreamEnded {
			wait = p.evidenceWait() // a text of grpc-go's: a real death shows within ms
		}
		// A lost connection shows a little before the exit of the process
		// that dropped it; wait for the exit too, unless a live server
		// (GOAWAY) dropping it is what the text says.
		look := gather(ctx, h, a.g, wait, !r.live)
		ev.exited, ev.lost, ev.gaveUp = look.exited, look.lost, ctx.Err() != nil
		if err == errStreamEnded && ev.dead() && !ev.exited {
			// The stream ended under SendMsg, which says nothing of why: a
			// plugin that lives and takes a new connection drained the old
			// one (GOAWAY), as the status RecvMsg would read says.
			ev.drained = reconnects(ctx, h, a.g, p.evidenceWait())
		}
	}
	return decide(err, ev), err
}

// gather looks at g: has its process exited, has its connection left READY
// or been closed. If neither yet, it waits for one of them at most wait,
// or until ctx ends; with exit, for the exit of g's process, if it has one,
// within the same bound.
func gather(ctx context.Context, h redial.Handle, g *redial.Generation, wait time.Duration, exit bool) evidence {
	ev := look(g)
	proc := g.Process()
	exit = exit && proc != nil
	if ev.exited || ev.lost && !exit || wait <= 0 {
		return ev
	}
	wctx, cancel := context.WithTimeout(ctx, wait)
	left := make(chan struct{})
	go func() {
		defer close(left)
		g.ClientConn().WaitForStateChange(wctx, connectivity.Ready)
	}()
	var exited <-chan struct{}
	if proc != nil {
		exited = proc.Done()
	}
	if !ev.lost {
		select {
		case <-exited:
		case <-left:
		case <-g.Retired():
		case <-wctx.Done():
		}
	}
	if exit {
		proc.Await(wctx, wait)
	}
	cancel()
	<-left
	return look(g)
}

// reconnects reports whether g's connection, closed after a GOAWAY, is
// READY again within wait, on a new transport to the same plugin, and g's
// process has not exited: a plugin that drains its connections (a maximum
// connection age) takes new ones; a plugin that stopped or died does not.
func reconnects(ctx context.Context, h redial.Handle, g *redial.Generation, wait time.Duration) bool {
	if wait <= 0 || look(g).exited {
		return false
	}
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	cc := g.ClientConn()
	for {
		switch s := cc.GetState(); s {
		case connectivity.Ready:
			return !look(g).exited
		case connectivity.TransientFailure, connectivity.Shutdown:
			return false
		default:
			cc.Connect() // an IDLE connection waits for a call to reconnect
			if !cc.WaitForStateChange(wctx, s) {
				return false
			}
		}
	}
}

// look takes the evidence that is there now, without waiting. A process
// whose death the kernel has under way (a zombie, a SIGKILL pending)
// counts as exited ([redial.Process.Await] asks the kernel): an attempt
// fails as soon as the plugin's socket closes, while its reaper and
// grpc-go's update of the connection's state run on goroutines of the
// host, which a loaded host runs late, after the evidence wait.
func look(g *redial.Generation) evidence {
	ev := evidence{exited: g.Process().Await(context.Background(), 0)}
	ev.lost = g.Gone() || g.ClientConn().GetState() != connectivity.Ready
	return ev
}

// errProcessExited cancels an attempt whose plugin died while the attempt
// waited for it to be ready.
var errProcessExited = errors.New("interceptor: plugin process exited")

// attemptContext returns a ctx for a retry attempt on g that is cancelled
// when g's process exits, so that an attempt queued by WaitForReady on a
// plugin that died at start does not wait out the caller's whole deadline.
func attemptContext(ctx context.Context, g *redial.Generation) (context.Context, context.CancelFunc) {
	proc := g.Process()
	if proc == nil {
		return ctx, func() {}
	}
	actx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(proc.Exited(), func() { cancel(errProcessExited) })
	return actx, func() { stop(); cancel(nil) }
}
