package proc

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"time"
)

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
	line, err := readLine(r, lineLimit)
	if !errors.Is(err, errLineTooLong) || len(line) != lineLimit {
		t.Fatalf("readLine = %d bytes, %v; want %d, errLineTooLong", len(line), err, lineLimit)
	}
	if r.n > lineLimit+1 {
		t.Errorf("read %d bytes of a line longer than the %d limit", r.n, lineLimit)
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
	got := make(chan Line, 1)
	go func() {
		line, err := readLine(pr, 100)
		got <- Line{line, err}
	}()
	select {
	case r := <-got:
		if !errors.Is(r.Err, errLineTooLong) || len(r.Text) != 100 {
			t.Fatalf("readLine = %d bytes, %v; want 100, errLineTooLong", len(r.Text), r.Err)
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

// lineLimit is the exec hook's limit of its first line.
const lineLimit = 64 << 10
