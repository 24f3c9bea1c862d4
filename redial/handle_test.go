package redial_test

import (
	"reflect"
	"testing"

	"github.com/grpc-respawn/respawn/redial"
)

// TestHandleIsNarrow: the Handle a Policy acts through keeps what is about
// the Conn as a whole, at most 10 methods (the verbs about one plugin are
// its Generation's), and has one unexported method, so that no package
// outside redial implements it and adding a method breaks no one.
func TestHandleIsNarrow(t *testing.T) {
	typ := reflect.TypeFor[redial.Handle]()
	var exported, unexported []string
	for i := range typ.NumMethod() {
		m := typ.Method(i)
		if m.IsExported() {
			exported = append(exported, m.Name)
		} else {
			unexported = append(unexported, m.Name)
		}
	}
	if len(exported) > 10 {
		t.Errorf("Handle has %d methods %v, want at most 10", len(exported), exported)
	}
	if len(unexported) != 1 {
		t.Errorf("Handle has unexported methods %v, want one, which keeps it implemented only by redial", unexported)
	}
}
