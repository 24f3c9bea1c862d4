package ledger

import (
	"github.com/grpc-respawn/respawn/internal/ledgerwire"

	"bytes"
	"encoding/binary"
	"reflect"
	"testing"
)

var sample = []record{
	{kind: kindStarted, id: "id-1", method: "/respawn.test.v1.Test/Append"},
	{kind: kindCompleted, id: "id-1", method: "/respawn.test.v1.Test/Append", kept: true, status: []byte{}, respType: "respawn.test.v1.AppendResponse", resp: []byte{0x08, 0x01}},
	{kind: kindCompleted, id: "id-2", method: "/m/M", status: []byte{0x08, 0x05, 0x12, 0x01, 'x'}},
	{kind: kindCompleted, id: "", method: "", kept: true, status: []byte{}, respType: "t.Empty", resp: []byte{}},
}

// frames returns the frames of recs, and where each one ends.
func frames(recs []record) (data []byte, ends []int) {
	for _, r := range recs {
		data = appendRecord(data, r)
		ends = append(ends, len(data))
	}
	return data, ends
}

// norm makes a record comparable whatever its empty slices are.
func norm(recs []record) []record {
	out := make([]record, len(recs))
	for i, r := range recs {
		if len(r.status) == 0 {
			r.status = nil
		}
		if len(r.resp) == 0 {
			r.resp = nil
		}
		out[i] = r
	}
	return out
}

func TestParseRoundTrip(t *testing.T) {
	for i, r := range sample {
		data := appendRecord(nil, r)
		got, end := parseAll(data)
		if end != len(data) || len(got) != 1 || !reflect.DeepEqual(norm(got)[0], norm(sample[i : i+1])[0]) {
			t.Errorf("parseAll(appendRecord(%+v)) = %+v, end %d; want the record back, end %d", r, got, end, len(data))
		}
	}
}

// TestParseTorn cuts a ledger at every byte: the records wholly before the
// cut are read, and the parse ends where the torn one begins.
func TestParseTorn(t *testing.T) {
	data, ends := frames(sample)
	for cut := 0; cut <= len(data); cut++ {
		whole := 0
		for whole < len(ends) && ends[whole] <= cut {
			whole++
		}
		wantEnd := 0
		if whole > 0 {
			wantEnd = ends[whole-1]
		}
		got, end := parseAll(data[:cut])
		if end != wantEnd || !reflect.DeepEqual(norm(got), norm(sample[:whole])) {
			t.Fatalf("cut at %d: got %d records, end %d; want %d records, end %d", cut, len(got), end, whole, wantEnd)
		}
	}
}

// frame makes a frame of payload with a correct header.
func frame(payload []byte) []byte {
	b := binary.LittleEndian.AppendUint32(nil, uint32(len(payload)))
	b = binary.LittleEndian.AppendUint32(b, ledgerwire.Checksum(payload))
	return append(b, payload...)
}

func TestParseCorrupt(t *testing.T) {
	first := appendRecord(nil, sample[0])
	second := appendRecord(nil, sample[1])
	flip := func(b []byte, i int) []byte {
		b = bytes.Clone(b)
		b[i] ^= 0x40
		return b
	}
	huge := binary.LittleEndian.AppendUint32(nil, 0xffffffff)
	huge = append(huge, 0, 0, 0, 0)
	tests := []struct {
		name    string
		after   []byte // what follows a good first record
		wantEnd int    // records read after the first: 0 or 1
	}{
		{"bad crc in the payload", flip(second, headerSize+3), 0},
		{"bad crc field", flip(second, 5), 0},
		{"length changed", flip(second, 0), 0},
		{"huge length", huge, 0},
		{"length past the end by one", append(binary.LittleEndian.AppendUint32(nil, uint32(len(second)-headerSize+1)), second[4:]...), 0},
		{"empty payload", frame(nil), 0},
		{"unknown kind", frame([]byte{9, 0, 0}), 0},
		{"started with trailing bytes", frame([]byte{kindStarted, 0, 0, 1}), 0},
		{"completed without flags", frame([]byte{kindCompleted, 0, 0}), 0},
		{"completed with unknown flags", frame([]byte{kindCompleted, 0, 0, 2, 0}), 0},
		{"completed unkept with a response", frame([]byte{kindCompleted, 0, 0, 0, 0, 'x'}), 0},
		{"id length past the payload", frame([]byte{kindStarted, 5, 'a'}), 0},
		{"non-minimal varint", frame([]byte{kindStarted, 0x80, 0x00, 0}), 0},
		{"varint overflow", frame(append([]byte{kindStarted}, bytes.Repeat([]byte{0xff}, 11)...)), 0},
		{"garbage", []byte("this is not a ledger at all, just some text"), 0},
		{"zeros", make([]byte, 64), 0},
		{"a good record", second, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := append(bytes.Clone(first), tt.after...)
			got, end := parseAll(data)
			want := len(first)
			if tt.wantEnd == 1 {
				want = len(data)
			}
			if end != want || len(got) != 1+tt.wantEnd {
				t.Errorf("parse: %d records, end %d; want %d records, end %d", len(got), end, 1+tt.wantEnd, want)
			}
			// What follows a corrupt frame is not read, even if whole.
			got, _ = parseAll(append(data, second...))
			if tt.wantEnd == 0 && len(got) != 1 {
				t.Errorf("parse went past the corrupt frame: %d records, want 1", len(got))
			}
		})
	}
}

// FuzzParse: parse never panics nor reads past its input; what it reads is
// what the bytes it took encode, and reading them again reads the same.
func FuzzParse(f *testing.F) {
	data, _ := frames(sample)
	f.Add(data)
	f.Add(data[:len(data)-1])
	f.Add(appendRecord(nil, sample[0]))
	f.Add(frame([]byte{kindCompleted, 0, 0, 1, 0, 0}))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		recs, end := parseAll(data)
		if end < 0 || end > len(data) {
			t.Fatalf("end %d outside [0, %d]", end, len(data))
		}
		var again []byte
		for _, r := range recs {
			again = appendRecord(again, r)
		}
		if !bytes.Equal(again, data[:end]) {
			t.Fatalf("the records read encode to %x, not to the %d bytes they were read from: %x", again, end, data[:end])
		}
		recs2, end2 := parseAll(data[:end])
		if end2 != end || !reflect.DeepEqual(norm(recs2), norm(recs)) {
			t.Fatalf("parsing the bytes taken again: %d records, end %d; want %d, end %d", len(recs2), end2, len(recs), end)
		}
	})
}

// TestParseHugeLengthAllocs: a length field that claims more than the input
// holds costs nothing.
func TestParseHugeLengthAllocs(t *testing.T) {
	data := []byte{0xff, 0xff, 0xff, 0x7f, 0, 0, 0, 0, 1, 2, 3}
	if n := testing.AllocsPerRun(100, func() { parseAll(data) }); n != 0 {
		t.Errorf("parse of a frame claiming 2 GiB allocates %v times, want 0", n)
	}
}

// parseAll is parse, collecting the records.
func parseAll(data []byte) (recs []record, end int) {
	end = parse(data, func(v view, _, _ int) { recs = append(recs, v.record()) })
	return recs, end
}
