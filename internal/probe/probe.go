// Package probe sends one grpc.health.v1 Check to a plugin and says what
// the answer means. Every probe respawn makes — the health watcher's,
// the check of a spare before a planned replacement, the look at a
// connection that failed to become ready — goes through [Check], so that
// one answer has one meaning everywhere; each caller then asks the
// question it needs answered: is the plugin alive ([Verdict.Alive]), or
// ready to take over ([Verdict.Ready])?
//
// A probe is one of respawn's own RPCs: its context is marked with
// ownrpc.With, so that the host's interceptors and stats handlers, which
// also run on a plugin's connection, can leave it out of the host's
// telemetry.
package probe

import (
	"context"
	"strconv"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/grpc-respawn/respawn/internal/ownrpc"
)

// Verdict is what one check says of the plugin.
type Verdict int

const (
	// Unreachable: no answer came from the plugin. grpc-go gives a call
	// that got none codes.DeadlineExceeded (the probe's deadline),
	// codes.Unavailable (no connection) or codes.Canceled (the connection,
	// or the caller's context, was closed).
	Unreachable Verdict = iota
	// Serving: the plugin answered SERVING.
	Serving
	// NotServing: the plugin answered, but not SERVING: another status
	// (NOT_SERVING, SERVICE_UNKNOWN, UNKNOWN), or an error it sent, such
	// as codes.NotFound for a service name it does not know.
	NotServing
	// NoHealthService: the plugin answered codes.Unimplemented: it serves
	// no grpc.health.v1 at all, and cannot say more than that it is there.
	NoHealthService
)

// Alive reports whether the plugin answered, whatever it said.
func (v Verdict) Alive() bool { return v != Unreachable }

// Ready reports whether the plugin may take calls: it answered SERVING,
// or it serves no health service, which a plugin need not.
func (v Verdict) Ready() bool { return v == Serving || v == NoHealthService }

// String returns the verdict's name in lower case.
func (v Verdict) String() string {
	switch v {
	case Unreachable:
		return "unreachable"
	case Serving:
		return "serving"
	case NotServing:
		return "not serving"
	case NoHealthService:
		return "no health service"
	}
	return "Verdict(" + strconv.Itoa(int(v)) + ")"
}

// Result is the outcome of one check.
type Result struct {
	Verdict Verdict
	// Status is what the plugin reported; UNKNOWN when it sent no
	// response.
	Status healthpb.HealthCheckResponse_ServingStatus
	// Err is the call's error, nil when the plugin sent a response.
	Err error
	// Took is the time from sending the check to its end.
	Took time.Duration
	// Expired: the check ran out of time, or the caller's ctx ended, before
	// an answer came, so Err says only that. The server may end the call
	// at the deadline it was sent a moment before the client's own timer
	// fires, so a DeadlineExceeded counts as expired whatever ctx says.
	Expired bool
}

// Check sends a grpc.health.v1 Check for service to cc, the plugin's own
// connection, bounded by timeout (no bound of its own when timeout is
// zero or negative), and judges the answer. The call is fail-fast: on a
// connection that is not READY it fails at once with the transport's
// error instead of waiting for one.
func Check(ctx context.Context, cc grpc.ClientConnInterface, service string, timeout time.Duration) Result {
	ctx = ownrpc.With(ctx)
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	resp := &healthpb.HealthCheckResponse{}
	began := time.Now()
	err := cc.Invoke(ctx, healthpb.Health_Check_FullMethodName, &healthpb.HealthCheckRequest{Service: service}, resp)
	r := Result{Err: err, Took: time.Since(began), Expired: ctx.Err() != nil || status.Code(err) == codes.DeadlineExceeded}
	if err == nil {
		r.Status = resp.GetStatus()
	}
	r.Verdict = judge(err, r.Status)
	return r
}

// judge gives the verdict on a check that ended with err and, when err is
// nil, the status st.
func judge(err error, st healthpb.HealthCheckResponse_ServingStatus) Verdict {
	switch status.Code(err) {
	case codes.OK:
		if st == healthpb.HealthCheckResponse_SERVING {
			return Serving
		}
		return NotServing
	case codes.DeadlineExceeded, codes.Unavailable, codes.Canceled:
		return Unreachable
	case codes.Unimplemented:
		return NoHealthService
	}
	return NotServing
}
