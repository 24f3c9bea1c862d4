//go:build !unix

package plugintest

import (
	"os"
	"os/exec"
)

// ownGroup does nothing here: the plugin has no group of its own.
func ownGroup(*exec.Cmd) {}

// killGroup kills p alone.
func killGroup(p *os.Process) { _ = p.Kill() }
