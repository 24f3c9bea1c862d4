package ledgerwire

import "testing"

// TestSent: what the host writes, the plugin reads back; anything else
// is refused.
func TestSent(t *testing.T) {
	for _, s := range []Sent{{}, {All: true, Digest: 0xdeadbeef, Length: 1 << 40}, {Digest: 1, Length: 36}} {
		if got, ok := ParseSent(s.String()); !ok || got != s {
			t.Errorf("ParseSent(%q) = %+v, %v; want %+v", s.String(), got, ok, s)
		}
	}
	for _, v := range []string{"", "all", "all deadbeef", "some deadbeef 1", "all deadbee 1", "all deadbeeg 1", "all deadbeef -1", "all deadbeef x", "all deadbeef 1 2"} {
		if got, ok := ParseSent(v); ok {
			t.Errorf("ParseSent(%q) = %+v; want refused", v, got)
		}
	}
}
