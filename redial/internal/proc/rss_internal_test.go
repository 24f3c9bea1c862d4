//go:build linux

package proc

import "testing"

func TestParseVmRSS(t *testing.T) {
	tests := []struct {
		name   string
		status string
		want   uint64
		err    bool
	}{
		{"a process", "Name:\ttestplugin\nVmPeak:\t  9000 kB\nVmRSS:\t    1234 kB\nRssAnon:\t 10 kB\n", 1234 * 1024, false},
		{"no VmRSS (kernel thread or zombie)", "Name:\tkthreadd\nState:\tS\n", 0, true},
		{"not kB", "VmRSS:\t 12 MB\n", 0, true},
		{"not a number", "VmRSS:\t many kB\n", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseVmRSS([]byte(tt.status))
			if got != tt.want || (err != nil) != tt.err {
				t.Errorf("parseVmRSS = %d, %v; want %d, error %v", got, err, tt.want, tt.err)
			}
		})
	}
}
