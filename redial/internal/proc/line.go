package proc

import (
	"bytes"
	"errors"
	"io"
	"slices"
)

// errLineTooLong is readLine's error for a line longer than its limit.
var errLineTooLong = errors.New("line too long")

// readLine reads r up to and including the first newline, and at most
// limit bytes of it. At the end of r it returns what came before, with a
// nil error: a plugin that printed its address and exited without a
// newline still printed it. Past limit it returns the first limit bytes
// and errLineTooLong, having read at most limit+1 bytes more than it
// returns. It returns as soon as it can tell, without waiting for more
// than what a Read gives.
func readLine(r io.Reader, limit int) (string, error) {
	buf := make([]byte, 0, min(limit+1, 4096))
	for {
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, min(cap(buf), limit+1-len(buf)))
		}
		start := len(buf)
		n, err := r.Read(buf[start:min(cap(buf), limit+1)])
		var done bool
		buf, done = endLine(buf[:start+n], start, limit)
		if done || err != nil { // err is io.EOF or a closed pipe
			r := lineOf(buf, limit)
			return r.Text, r.Err
		}
	}
}

// endLine cuts line, whose bytes from start on are newly read, after its
// first newline, and reports whether it is complete: it has its newline,
// or it is longer than limit. readLine and the Linux I/O loop share it.
func endLine(line []byte, start, limit int) ([]byte, bool) {
	if i := bytes.IndexByte(line[start:], '\n'); i >= 0 {
		return line[:start+i+1], true
	}
	return line, len(line) > limit
}

// lineOf is the result for line, read as far as it goes: past limit, its
// first limit bytes and errLineTooLong.
func lineOf(line []byte, limit int) Line {
	if len(line) > limit {
		return Line{string(line[:limit]), errLineTooLong}
	}
	return Line{string(line), nil}
}
