// Package protoidem reads a gRPC method's proto option idempotency_level,
// for the client's retry policy (interceptor) and the plugin's ledger
// alike: one answer per method, whichever side asks.
package protoidem

import (
	"strings"
	"sync"
	"sync/atomic"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
)

// levels is a copy-on-write cache, full method name → idempotent: a hit
// is one atomic load and one map lookup, without allocating (a sync.Map
// would box the string key on every Load).
var (
	levels atomic.Pointer[map[string]bool]
	mu     sync.Mutex // serialises the writers of levels
)

// Idempotent reports whether fullMethod ("/pkg.Service/Method") is declared
// NO_SIDE_EFFECTS or IDEMPOTENT in protoregistry.GlobalFiles. A method that
// is not registered, or declares no level, is not. The first answer for a
// method is kept for the life of the process. Safe for concurrent use.
func Idempotent(fullMethod string) bool {
	if m := levels.Load(); m != nil {
		if ok, found := (*m)[fullMethod]; found {
			return ok
		}
	}
	ok := lookup(fullMethod)
	mu.Lock()
	defer mu.Unlock()
	var old map[string]bool
	if p := levels.Load(); p != nil {
		old = *p
	}
	if len(old) >= maxCached {
		return ok
	}
	next := make(map[string]bool, len(old)+1)
	for k, v := range old {
		next[k] = v
	}
	next[fullMethod] = ok
	levels.Store(&next)
	return ok
}

// maxCached bounds how many methods the cache remembers, so that a client
// calling method names it makes up cannot grow it without end; past it,
// the unknown names are looked up each time.
const maxCached = 4096

func lookup(fullMethod string) bool {
	svc, name, ok := strings.Cut(strings.TrimPrefix(fullMethod, "/"), "/")
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
