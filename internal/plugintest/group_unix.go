//go:build unix

package plugintest

import (
	"os"
	"os/exec"
	"syscall"
)

// ownGroup makes cmd's process the leader of a process group of its own.
func ownGroup(cmd *exec.Cmd) { cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} }

// killGroup SIGKILLs the process group that p leads.
func killGroup(p *os.Process) { _ = syscall.Kill(-p.Pid, syscall.SIGKILL) }
