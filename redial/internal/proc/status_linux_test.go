package proc

import (
	"os"
	"testing"
)

func TestParseDying(t *testing.T) {
	const live = "Name:\ttestplugin\nState:\tS (sleeping)\nTgid:\t42\nSigQ:\t0/31334\nSigPnd:\t0000000000000000\nShdPnd:\t0000000000000000\nSigBlk:\t0000000000000000\n"
	tests := []struct {
		name, status, want string
	}{
		{"running", live, ""},
		{"stopped", "State:\tT (stopped)\nSigPnd:\t0000000000000000\nShdPnd:\t0000000000000000\n", ""},
		{"zombie", "State:\tZ (zombie)\n", "a zombie"},
		{"dead", "State:\tX (dead)\n", "a zombie"},
		{"SIGKILL pending for the process", "State:\tR (running)\nSigPnd:\t0000000000000000\nShdPnd:\t0000000000000100\n", "with a SIGKILL pending"},
		{"SIGKILL pending for the thread", "State:\tS (sleeping)\nSigPnd:\t0000000000000100\nShdPnd:\t0000000000000000\n", "with a SIGKILL pending"},
		{"other signals pending", "State:\tS (sleeping)\nSigPnd:\t0000000000004002\nShdPnd:\t0000000000000200\n", ""},
		{"unparsable mask", "State:\tS (sleeping)\nShdPnd:\tzz\n", ""},
		{"empty", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := parseDying([]byte(tt.status))
			if got != tt.want || ok != (tt.want != "") {
				t.Errorf("parseDying = %q, %v; want %q, %v", got, ok, tt.want, tt.want != "")
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
