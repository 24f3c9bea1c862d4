package protoidem_test

import (
	"testing"

	"github.com/grpc-respawn/respawn/internal/protoidem"
	_ "github.com/grpc-respawn/respawn/internal/testpb" // registers respawn.test.v1.Test
)

func TestIdempotent(t *testing.T) {
	tests := []struct {
		name, method string
		want         bool
	}{
		{"NO_SIDE_EFFECTS", "/respawn.test.v1.Test/Get", true},
		{"IDEMPOTENT", "/respawn.test.v1.Test/Put", true},
		{"no option", "/respawn.test.v1.Test/Append", false},
		{"unknown method", "/respawn.test.v1.Test/Nope", false},
		{"unknown service", "/nope.Nope/Get", false},
		{"a message, not a method", "/respawn.test.v1/GetRequest", false},
		{"no slash", "Get", false},
		{"empty", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for i := range 2 { // the lookup, then the cache
				if got := protoidem.Idempotent(tt.method); got != tt.want {
					t.Errorf("Idempotent(%q) #%d = %v, want %v", tt.method, i, got, tt.want)
				}
			}
		})
	}
}

func TestIdempotentCachedAllocs(t *testing.T) {
	const method = "/respawn.test.v1.Test/Get"
	protoidem.Idempotent(method)
	if n := testing.AllocsPerRun(100, func() { protoidem.Idempotent(method) }); n != 0 {
		t.Errorf("a cached answer allocates %v times, want 0", n)
	}
}
