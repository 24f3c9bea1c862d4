package ledger

import (
	"os"
	"testing"

	"github.com/grpc-respawn/respawn/internal/ledgerwire"
)

// ForgetOpened makes ServerOptions forget the ledger this test process
// opened last, as a process that opened none.
func ForgetOpened() {
	opened.Lock()
	opened.last = nil
	opened.Unlock()
}

// The ledger lives as long as its plugin's process; tests, which open many,
// close them.

func (l *ledger) close() error {
	l.idx.close()
	return l.f.Close()
}

func (x *index) close() {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, lf := range x.files {
		lf.close()
	}
	x.files = nil
}

// appendRecord appends the frame of r; the format's definition, which
// the plugin's encoders (appendStarted, appendCompleted) follow.
func appendRecord(b []byte, r record) []byte {
	if r.kind == kindStarted {
		return appendStarted(b, r.id, r.method)
	}
	start := len(b)
	b = ledgerwire.BeginFrame(b)
	b = appendCompletedHead(b, r.id, r.method, r.kept, r.status)
	if r.kept {
		b = appendString(b, r.respType)
		b = append(b, r.resp...)
	}
	return ledgerwire.FinishFrame(b, start)
}

// openMade opens the ledger at path as a plugin that respawn's host
// launched: the host made the file, empty, and gave the launch a key.
func openMade(tb testing.TB, path string, c config) (*ledger, error) {
	tb.Helper()
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		tb.Fatal(err)
	}
	return open(path, "testkey", c)
}
