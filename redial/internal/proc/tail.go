package proc

import (
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// tailSize is how much of a plugin's stderr a [Tail] keeps: enough for a
// Go panic's first lines or go-plugin's "This binary is a plugin" notice.
const tailSize = 2048

// Tail is an io.Writer that keeps the last 2 KiB written to it: the end of
// a plugin's stderr, quoted in launch errors. A zero Tail is ready to use;
// it is safe for concurrent use.
type Tail struct {
	mu   sync.Mutex
	buf  []byte // at most 2*tailSize; the last tailSize bytes count
	lost bool   // earlier bytes were dropped
}

// Write keeps the end of p. It never fails.
func (t *Tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := len(p)
	if len(p) > tailSize {
		p, t.lost = p[len(p)-tailSize:], true
	}
	t.buf = append(t.buf, p...)
	if len(t.buf) > 2*tailSize {
		t.buf, t.lost = append(t.buf[:0], t.buf[len(t.buf)-tailSize:]...), true
	}
	return n, nil
}

// String returns the last 2 KiB written, trimmed of surrounding space and
// beginning with "…" when earlier output was dropped. A nil Tail is "".
func (t *Tail) String() string {
	if t == nil {
		return ""
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	b, lost := t.buf, t.lost
	if len(b) > tailSize {
		b, lost = b[len(b)-tailSize:], true
	}
	for lost && len(b) > 0 && !utf8.RuneStart(b[0]) {
		b = b[1:] // do not start inside a rune
	}
	s := strings.TrimSpace(string(b))
	if lost && s != "" {
		s = "…" + s
	}
	return s
}

// QuoteTail quotes a plugin's output for an error message: it is input
// from a process, so control characters are escaped.
func QuoteTail(s string) string { return strconv.Quote(s) }
