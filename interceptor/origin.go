package interceptor

import (
	"reflect"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/balancer/pickfirst"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// A status that arrived in the server's trailers came from the plugin
// itself, on a live transport: it is the plugin's own, whatever its code
// and text, and needs no evidence. Only grpc-go knows where a status came
// from, and it tells a load balancer: each pick's Done gets the attempt's
// error and the trailer metadata received (a trailers-only response always
// carries content-type; a transport that failed carries none). The
// interceptor's connections use pick_first wrapped so that its picks record
// the errors that came with trailers; the interceptor finds its attempt's
// error among them. A successful call records nothing and allocates
// nothing: grpc-go reads the trailer for every attempt anyway.

// lbPolicy is the name of pick_first with that record.
const lbPolicy = "respawn_pick_first"

// lbServiceConfig makes a connection use lbPolicy, unless the name
// resolver gives a service config of its own.
const lbServiceConfig = `{"loadBalancingConfig":[{"` + lbPolicy + `":{}}]}`

func init() { balancer.Register(lbBuilder{}) }

// lbDialOption is the default service config of the Policy's connections
// (Binding.Defaults): pick_first wrapped so that grpc-go tells the
// interceptors which failures came in the plugin's trailers, and need no
// wait for evidence. redial gives it before the host's dial options, so
// that a host's own default service config (or its name resolver's)
// replaces it: such a host loses only that shortcut.
func lbDialOption() grpc.DialOption { return grpc.WithDefaultServiceConfig(lbServiceConfig) }

type lbBuilder struct{}

func (lbBuilder) Name() string { return lbPolicy }

func (lbBuilder) Build(cc balancer.ClientConn, opts balancer.BuildOptions) balancer.Balancer {
	return balancer.Get(pickfirst.Name).Build(lbConn{cc}, opts)
}

// lbConn hands pick_first's pickers out wrapped.
type lbConn struct{ balancer.ClientConn }

func (c lbConn) UpdateState(s balancer.State) {
	if s.Picker != nil {
		s.Picker = lbPicker{s.Picker}
	}
	c.ClientConn.UpdateState(s)
}

type lbPicker struct{ balancer.Picker }

func (p lbPicker) Pick(info balancer.PickInfo) (balancer.PickResult, error) {
	r, err := p.Picker.Pick(info)
	if err == nil && r.Done == nil { // pick_first sets none
		r.Done = noteDone
	}
	return r, err
}

// noteDone records info.Err if it came with trailers. grpc-go may end an
// attempt whose trailers are in with an error of its own, Canceled or
// DeadlineExceeded, one value for all calls (the closing of the
// ClientConn, the end of the caller's ctx): those are not recorded, and a
// plugin's own such status is judged on evidence.
func noteDone(info balancer.DoneInfo) {
	switch status.Code(info.Err) {
	case codes.OK, codes.Canceled, codes.DeadlineExceeded:
		return
	}
	if len(info.Trailer) > 0 {
		fromPlugin.add(info.Err)
	}
}

// fromPlugin holds the latest errors of attempts that ended with a status
// in the server's trailers, by identity: grpc-go returns that very error
// value to the interceptors. One that has dropped out of the ring, under
// many failures at once, is judged on evidence as before.
var fromPlugin origins

type origins struct {
	mu   sync.Mutex
	errs [64]error
	next int
}

func (o *origins) add(err error) {
	if !reflect.TypeOf(err).Comparable() {
		return
	}
	o.mu.Lock()
	o.errs[o.next] = err
	o.next = (o.next + 1) % len(o.errs)
	o.mu.Unlock()
}

// take reports whether err is the error of an attempt whose status came
// in the server's trailers, and forgets it.
func (o *origins) take(err error) bool {
	if err == nil || !reflect.TypeOf(err).Comparable() {
		return false
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	for i, e := range o.errs {
		if e == err {
			o.errs[i] = nil
			return true
		}
	}
	return false
}
