package interceptor

import (
	"google.golang.org/grpc"

	"github.com/grpc-respawn/respawn/internal/protoidem"
)

// idempotent decides whether a call may run again: the per-call option,
// then the setup options, then the proto option idempotency_level. Unknown
// means no. Unary calls and server streams ask once they failed; client
// and bidi streams when they open (see WithIdempotencyFunc).
func (p *Policy) idempotent(method string, req any, opts []grpc.CallOption) bool {
	for i := len(opts) - 1; i >= 0; i-- {
		if o, ok := opts[i].(idempotentOption); ok {
			return o.ok
		}
	}
	if p.opts.methods[method] {
		return true
	}
	if p.opts.idempotency != nil {
		if ok, known := p.opts.idempotency(method, req); known {
			return ok
		}
	}
	return protoidem.Idempotent(method)
}
