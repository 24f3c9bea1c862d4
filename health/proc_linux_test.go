package health

import "testing"

func TestParseStat(t *testing.T) {
	for _, tc := range []struct {
		name, line string
		want       stat
		ok         bool
	}{
		{"running", "42 (plugin) R 1 42 42 0 -1 4194560 100 0 0 0 7 3 0 0 20 0 9 0 1 0 0", stat{'R', 7, 3}, true},
		{"stopped", "42 (plugin) T 1 42 42 0 -1 4194560 100 0 0 0 120 45 0 0 20 0 9 0 1 0 0", stat{'T', 120, 45}, true},
		{"name with spaces and parens", "42 (a) T (b) S 1 42 42 0 -1 0 0 0 0 0 5 6 0 0", stat{'S', 5, 6}, true},
		{"no name", "42 plugin S 1", stat{}, false},
		{"short", "42 (plugin) S 1 2 3", stat{}, false},
		{"bad utime", "42 (plugin) S 1 42 42 0 -1 0 0 0 0 0 x 6 0 0", stat{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := parseStat([]byte(tc.line))
			if got != tc.want || ok != tc.ok {
				t.Errorf("parseStat(%q) = %+v, %v; want %+v, %v", tc.line, got, ok, tc.want, tc.ok)
			}
		})
	}
}
