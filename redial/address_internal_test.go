package redial

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func TestQuote(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string // a prefix of the result; empty: the whole strconv.Quote
	}{
		{name: "short", in: "hello"},
		{name: "exactly fits", in: strings.Repeat("a", maxQuote-2)},
		{name: "one too many", in: strings.Repeat("a", maxQuote-1), want: `"` + strings.Repeat("a", maxQuote-5)},
		{name: "8 MB", in: strings.Repeat("1|1|unix|", 1<<20), want: `"1|1|unix|`},
		{name: "escapes", in: strings.Repeat("\x00", 2000), want: `"\x00`},
		{name: "multibyte", in: strings.Repeat("é", 2000), want: `"éé`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := quote(tt.in)
			if len(got) > maxQuote {
				t.Errorf("len(quote) = %d, want <= %d", len(got), maxQuote)
			}
			if tt.want == "" {
				if want := `"` + tt.in + `"`; got != want {
					t.Errorf("quote = %.40q..., want it whole", got)
				}
				return
			}
			if !strings.HasPrefix(got, tt.want) || !strings.HasSuffix(got, `…"`) {
				t.Errorf("quote = %.60q...%q, want %.60q... ending in …", got, got[max(0, len(got)-8):], tt.want)
			}
			if !utf8.ValidString(got) {
				t.Errorf("quote cut a rune: %q", got)
			}
		})
	}
}

func TestReadLine(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		limit   int
		want    string
		wantErr error
	}{
		{name: "line", in: "unix:///x\nmore", limit: 100, want: "unix:///x\n"},
		{name: "no newline before EOF", in: "unix:///x", limit: 100, want: "unix:///x"},
		{name: "empty", in: "", limit: 100, want: ""},
		{name: "at the limit", in: "abcd\n", limit: 5, want: "abcd\n"},
		{name: "past the limit", in: "abcdef\n", limit: 5, want: "abcde", wantErr: errLineTooLong},
		{name: "longer than the buffer", in: strings.Repeat("x", 10000) + "\n", limit: 20000, want: strings.Repeat("x", 10000) + "\n"},
		{name: "far past the limit", in: strings.Repeat("x", 1<<20), limit: 6000, want: strings.Repeat("x", 6000), wantErr: errLineTooLong},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := readLine(strings.NewReader(tt.in), tt.limit)
			if got != tt.want || !errors.Is(err, tt.wantErr) {
				t.Errorf("readLine = %.30q (len %d), %v; want %.30q (len %d), %v", got, len(got), err, tt.want, len(tt.want), tt.wantErr)
			}
		})
	}
}

// TestReadLineIsBounded: a first line of 512 MB without a newline must not
// be read whole; readLine stops at its limit.
func TestReadLineIsBounded(t *testing.T) {
	r := &countingReader{r: io.LimitReader(zeroes{}, 512<<20)}
	line, err := readLine(r, MaxAddressLine)
	if !errors.Is(err, errLineTooLong) || len(line) != MaxAddressLine {
		t.Fatalf("readLine = %d bytes, %v; want %d, errLineTooLong", len(line), err, MaxAddressLine)
	}
	if r.n > MaxAddressLine+1 {
		t.Errorf("read %d bytes of a line longer than the %d limit", r.n, MaxAddressLine)
	}
}

// TestReadLineDoesNotWaitForMore: a line one byte past the limit, from a
// writer that then goes quiet, is refused at once rather than waited on.
func TestReadLineDoesNotWaitForMore(t *testing.T) {
	pr, pw := io.Pipe()
	quiet := make(chan struct{})
	defer close(quiet)
	go func() {
		_, _ = pw.Write(bytes.Repeat([]byte{'x'}, 100+1))
		<-quiet
		pw.Close()
	}()
	got := make(chan lineResult, 1)
	go func() {
		line, err := readLine(pr, 100)
		got <- lineResult{line, err}
	}()
	select {
	case r := <-got:
		if !errors.Is(r.err, errLineTooLong) || len(r.line) != 100 {
			t.Fatalf("readLine = %d bytes, %v; want 100, errLineTooLong", len(r.line), r.err)
		}
	case <-time.After(10 * time.Second): // the deferred close of quiet ends it
		t.Fatal("readLine still waits for more 10s after the limit was passed")
	}
}

type zeroes struct{}

func (zeroes) Read(p []byte) (int, error) { clear(p); return len(p), nil }

type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

func TestIsLoopback(t *testing.T) {
	tests := []struct {
		host string
		want bool
	}{
		{"localhost", true},
		{"LOCALHOST", true},
		{"127.0.0.1", true},
		{"127.1.2.3", true},
		{"::1", true},
		{"::ffff:127.0.0.1", true},
		{"203.0.113.7", false},
		{"0.0.0.0", false},
		{"", false},
		{"plugin.local", false},
		{"localhost.example.com", false},
		{"::", false},
	}
	for _, tt := range tests {
		if got := isLoopback(tt.host); got != tt.want {
			t.Errorf("isLoopback(%q) = %v, want %v", tt.host, got, tt.want)
		}
	}
}

// FuzzParseAddress: any first line parses or fails with a bounded error,
// never panics, and what parses names a unix socket or a TCP host.
func FuzzParseAddress(f *testing.F) {
	for _, s := range []string{
		"unix:///tmp/p/plugin.sock", "unix:rel.sock", "/tmp/x.sock", "127.0.0.1:7000",
		"1|1|unix|/tmp/plugin1|grpc", "1|1|tcp|127.0.0.1:1|grpc", "1|1|tcp|x|netrpc",
		"dns:///a:1", "dns://8.8.8.8/a", "passthrough:///[::1]:80", "unix://host/x", "\xff|\x00",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		a, err := parseAddress(line)
		if err != nil {
			if a != (address{}) {
				t.Fatalf("parseAddress(%q) = %+v with error %v", line, a, err)
			}
			if n := len(err.Error()); n > 3*maxQuote {
				t.Fatalf("error of %d bytes for a %d-byte line", n, len(line))
			}
			return
		}
		switch {
		case a.target == "":
			t.Fatalf("parseAddress(%q) = %+v: no target", line, a)
		case a.sock != "" && a.host != "":
			t.Fatalf("parseAddress(%q) = %+v: both a socket and a host", line, a)
		case a.sock != "" && !strings.HasPrefix(a.target, "unix:"):
			t.Fatalf("parseAddress(%q) = %+v: a socket with a non-unix target", line, a)
		case a.sock == "" && strings.HasPrefix(a.target, "unix"):
			t.Fatalf("parseAddress(%q) = %+v: a unix target without a socket", line, a)
		}
	})
}

// FuzzReadLine: readLine never returns more than its limit, and returns
// exactly the input's first line when that fits.
func FuzzReadLine(f *testing.F) {
	f.Add([]byte("unix:///x\nrest"), 16)
	f.Add([]byte(strings.Repeat("x", 5000)), 4097)
	f.Add([]byte{}, 1)
	f.Fuzz(func(t *testing.T, in []byte, limit int) {
		if limit <= 0 || limit > 1<<16 {
			return
		}
		line, err := readLine(bytes.NewReader(in), limit)
		if len(line) > limit {
			t.Fatalf("readLine returned %d bytes, limit %d", len(line), limit)
		}
		first := in
		if i := bytes.IndexByte(in, '\n'); i >= 0 {
			first = in[:i+1]
		}
		if len(first) <= limit && (err != nil || line != string(first)) {
			t.Fatalf("readLine = %q, %v; want %q", line, err, first)
		}
		if len(first) > limit && (!errors.Is(err, errLineTooLong) || line != string(first[:limit])) {
			t.Fatalf("readLine = %q, %v; want %q and errLineTooLong", line, err, first[:limit])
		}
	})
}
