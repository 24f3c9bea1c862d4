package redial

import (
	"log/slog"

	"github.com/grpc-respawn/respawn/redial/internal/relay"
)

// eventQueue is how many events wait for a slow handler before the newest
// are dropped.
const eventQueue = 256

// newDelivery returns the relay that hands events to f, the handler of
// [WithEventHandler], in order on a goroutine of its own, so that a slow or
// panicking handler never blocks or crashes the goroutine that emits; nil
// if f is nil.
func newDelivery(f func(Event)) *relay.Relay[Event] {
	if f == nil {
		return nil
	}
	return relay.New(relay.Config[Event]{
		Deliver: f,
		Limit:   eventQueue,
		Panicked: func(e Event, r any) bool {
			slog.Error("redial: event handler panicked; recovered", "event", string(e.Kind),
				"generation", e.Generation, "panic", r)
			return false
		},
	})
}
