//go:build unix

package interceptor_test

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/logging"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
)

// probes watch a chain: the lines mw's logging interceptor writes, the calls
// that reach respawn's layer, and the attempts handed to grpc-go.
type probes struct {
	mu       sync.Mutex
	finished map[string][]codes.Code // "finished call" lines: the grpc.code logged, per method
	entered  map[string]int          // calls that reached respawn's layer (or the selector around it)
	attempts map[string][]attemptSeen
}

// attemptSeen is one attempt as grpc-go got it.
type attemptSeen struct {
	cc       *grpc.ClientConn
	deadline time.Time
}

func newProbes() *probes {
	p := &probes{}
	p.reset()
	return p
}

func (p *probes) reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.finished = make(map[string][]codes.Code)
	p.entered = make(map[string]int)
	p.attempts = make(map[string][]attemptSeen)
}

// logger is a logging.Logger that keeps what mw's logging interceptor says
// of each finished call.
func (p *probes) logger() logging.Logger {
	return logging.LoggerFunc(func(_ context.Context, _ logging.Level, msg string, fields ...any) {
		if msg != "finished call" {
			return
		}
		var service, method, code string
		for i := 0; i+1 < len(fields); i += 2 {
			v, _ := fields[i+1].(string)
			switch fields[i] {
			case logging.ServiceFieldKey:
				service = v
			case logging.MethodFieldKey:
				method = v
			case "grpc.code":
				code = v
			}
		}
		c := codes.Code(999) // not a code mw logs
		for k := codes.OK; k <= codes.Unauthenticated; k++ {
			if k.String() == code {
				c = k
			}
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		full := "/" + service + "/" + method
		p.finished[full] = append(p.finished[full], c)
	})
}

// enter counts the calls that reach it.
func (p *probes) enter(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	p.mu.Lock()
	p.entered[method]++
	p.mu.Unlock()
	return invoker(ctx, method, req, reply, cc, opts...)
}

// attempt, the innermost interceptor, records each attempt's connection and
// deadline.
func (p *probes) attempt(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	d, _ := ctx.Deadline()
	p.mu.Lock()
	p.attempts[method] = append(p.attempts[method], attemptSeen{cc: cc, deadline: d})
	p.mu.Unlock()
	return invoker(ctx, method, req, reply, cc, opts...)
}

func (p *probes) logged(method string) []codes.Code {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.finished[method])
}

func (p *probes) entries(method string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.entered[method]
}

func (p *probes) seen(method string) []attemptSeen {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.attempts[method])
}
