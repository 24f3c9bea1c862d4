package interceptor

import (
	"strings"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
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
	return protoIdempotent(method)
}

var protoLevels sync.Map // full method name → bool

// protoIdempotent looks up the method's idempotency_level in
// protoregistry.GlobalFiles once and caches the answer.
func protoIdempotent(method string) bool {
	if v, ok := protoLevels.Load(method); ok {
		return v.(bool)
	}
	ok := lookupLevel(method)
	protoLevels.Store(method, ok)
	return ok
}

func lookupLevel(method string) bool {
	svc, name, ok := strings.Cut(strings.TrimPrefix(method, "/"), "/")
	if !ok {
		return false
	}
	d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(svc + "." + name))
	if err != nil {
		return false
	}
	md, ok := d.(protoreflect.MethodDescriptor)
	if !ok {
		return false
	}
	mo, ok := md.Options().(*descriptorpb.MethodOptions)
	if !ok {
		return false
	}
	switch mo.GetIdempotencyLevel() {
	case descriptorpb.MethodOptions_NO_SIDE_EFFECTS, descriptorpb.MethodOptions_IDEMPOTENT:
		return true
	}
	return false
}
