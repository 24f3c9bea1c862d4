package procfs

import (
	"os"
	"testing"
)

func TestParseStat(t *testing.T) {
	for _, tc := range []struct {
		name, line string
		want       Stat
		ok         bool
	}{
		{"running", "42 (plugin) R 1 42 42 0 -1 4194560 100 0 0 0 7 3 0 0 20 0 9 0 1 0 0", Stat{'R', 10}, true},
		{"stopped", "42 (plugin) T 1 42 42 0 -1 4194560 100 0 0 0 120 45 0 0 20 0 9 0 1 0 0", Stat{'T', 165}, true},
		{"name with spaces and parens", "42 (a) T (b) S 1 42 42 0 -1 0 0 0 0 0 5 6 0 0", Stat{'S', 11}, true},
		{"no name", "42 plugin S 1", Stat{}, false},
		{"short", "42 (plugin) S 1 2 3", Stat{}, false},
		{"bad utime", "42 (plugin) S 1 42 42 0 -1 0 0 0 0 0 x 6 0 0", Stat{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := parseStat([]byte(tc.line))
			if got != tc.want || ok != tc.ok {
				t.Errorf("parseStat(%q) = %+v, %v; want %+v, %v", tc.line, got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestParseTask(t *testing.T) {
	const live = "Name:\ttestplugin\nState:\tS (sleeping)\nTgid:\t42\nThreads:\t8\nSigQ:\t0/31334\nSigPnd:\t0000000000000000\nShdPnd:\t0000000000000000\nSigBlk:\t0000000000000000\n"
	tests := []struct {
		name, status string
		want         task
	}{
		{"running", live, task{threads: 8}},
		{"stopped", "State:\tT (stopped)\nSigPnd:\t0000000000000000\nShdPnd:\t0000000000000000\n", task{}},
		{"zombie", "State:\tZ (zombie)\nThreads:\t1\n", task{exited: true, threads: 1}},
		{"zombie leader, threads serving", "State:\tZ (zombie)\nThreads:\t8\nSigPnd:\t0000000000000000\n", task{exited: true, threads: 8}},
		{"dead", "State:\tX (dead)\n", task{exited: true}},
		{"SIGKILL pending for the process", "State:\tR (running)\nSigPnd:\t0000000000000000\nShdPnd:\t0000000000000100\n", task{killed: true}},
		{"SIGKILL pending for the thread", "State:\tS (sleeping)\nSigPnd:\t0000000000000100\nShdPnd:\t0000000000000000\n", task{killed: true}},
		{"other signals pending", "State:\tS (sleeping)\nSigPnd:\t0000000000004002\nShdPnd:\t0000000000000200\n", task{}},
		{"unparsable mask", "State:\tS (sleeping)\nShdPnd:\tzz\n", task{}},
		{"empty", "", task{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := parseTask([]byte(tt.status)); got != tt.want {
				t.Errorf("parseTask = %+v; want %+v", got, tt.want)
			}
		})
	}
}

// TestDyingSelf: this process is alive, and a pid that names no process
// is gone.
func TestDyingSelf(t *testing.T) {
	if how, ok := Dying(os.Getpid()); ok {
		t.Errorf("Dying(self) = %q, want alive", how)
	}
	if how, ok := Dying(1 << 30); !ok || how != "gone" {
		t.Errorf("Dying(no such pid) = %q, %v; want gone", how, ok)
	}
}

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
