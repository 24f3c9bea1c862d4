package ledgerwire

import (
	"math"
	"strings"
	"testing"
)

// TestOpened: an opened record is recognised for its key and pid only, and
// any other first bytes of a file, whole or cut short, are not one.
func TestOpened(t *testing.T) {
	rec := AppendOpened(nil, "key1", 4242)
	if len(rec) > MaxOpened {
		t.Fatalf("opened record of %d bytes, over MaxOpened %d", len(rec), MaxOpened)
	}
	long := AppendOpened(nil, strings.Repeat("k", MaxKey), math.MaxInt)
	if len(long) > MaxOpened || !Opened(long, strings.Repeat("k", MaxKey), math.MaxInt) {
		t.Errorf("the longest opened record, %d bytes: over MaxOpened %d, or not recognised", len(long), MaxOpened)
	}
	if !Opened(rec, "key1", 4242) || !Opened(append(rec, "more records"...), "key1", 4242) {
		t.Fatal("an opened record of key1, pid 4242 is not recognised")
	}
	flipped := append([]byte(nil), rec...)
	flipped[len(flipped)-1] ^= 1
	tooLong := AppendOpened(nil, strings.Repeat("k", MaxKey+1), 1)
	for name, first := range map[string][]byte{
		"another key":    AppendOpened(nil, "key2", 4242),
		"another pid":    AppendOpened(nil, "key1", 4243),
		"a bad checksum": flipped,
		"a key too long": tooLong,
		"empty":          nil,
		"another kind":   FinishFrame(append(BeginFrame(nil), 1, 4, 'k', 'e', 'y', '1', 0), 0),
		"trailing bytes": FinishFrame(append(BeginFrame(nil), append(rec[FrameHeader:], 0)...), 0),
	} {
		if Opened(first, "key1", 4242) {
			t.Errorf("%s: taken for the opened record of key1, pid 4242", name)
		}
		for i := range first {
			if Opened(first[:i], "key1", 4242) {
				t.Errorf("%s cut to %d bytes: taken for an opened record", name, i)
			}
		}
	}
	for i := range rec {
		if Opened(rec[:i], "key1", 4242) {
			t.Errorf("the record cut to %d bytes: taken for it", i)
		}
	}
	if Opened(AppendOpened(nil, "key1", 0), "key1", 0) {
		t.Error("pid 0 taken for a process's")
	}
}

func TestValidKey(t *testing.T) {
	for key, want := range map[string]bool{
		"ABCDEFGHIJKLMNOPQRSTUVWXYZ": true, "a1": true, "": false, "a,b": false, "a b": false,
		strings.Repeat("a", MaxKey): true, strings.Repeat("a", MaxKey+1): false,
	} {
		if got := ValidKey(key); got != want {
			t.Errorf("ValidKey(%q) = %v, want %v", key, got, want)
		}
	}
}

// TestZeroFrame: zeros, the preallocated rest of a file past its records,
// are no frame (whose empty payload would pass its zero checksum), and no
// opened record.
func TestZeroFrame(t *testing.T) {
	zeros := make([]byte, 4096)
	if n, ok := FrameLen(zeros, int64(len(zeros))); ok {
		t.Errorf("FrameLen of zeros = %d, true; want no frame", n)
	}
	if Opened(zeros[:MaxOpened], "key1", 4242) {
		t.Error("zeros taken for an opened record")
	}
}
