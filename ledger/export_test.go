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
	l.m.close()
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

// RecordedSize returns the length of the records in the ledger file at
// path, as a successor reads them: its size less any zero-filled,
// preallocated rest.
func RecordedSize(path string) (int64, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return int64(parse(data, func(view, int, int) {})), nil
}
