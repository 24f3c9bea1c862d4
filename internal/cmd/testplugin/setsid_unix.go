//go:build unix

package main

import (
	"os/exec"
	"syscall"
)

// setsid makes cmd's process a session (and group) of its own.
func setsid(cmd *exec.Cmd) { cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} }
