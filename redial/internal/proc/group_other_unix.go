//go:build unix && !linux

package proc

import (
	"errors"
	"os/exec"
)

// waitExited is not available here (no waitid with WNOWAIT in x/sys/unix):
// the reaper reaps first and stops signalling just before.
func waitExited(int) error { return errors.ErrUnsupported }

// exitedUnreaped is never known here (and never asked by reapExited: only
// Linux's I/O loop reaps with it).
func exitedUnreaped(int) bool { return false }

// reapGroup is never asked here either.
func reapGroup(int) {}

// startCmd starts cmd. Only Linux has a parent-death signal that can be
// set from os/exec for every child (FreeBSD's follows the process, but is
// not set here): elsewhere a plugin outlives a host killed without Close.
func startCmd(cmd *exec.Cmd) (release func(), err error) { return func() {}, cmd.Start() }

// oomCount is the kernel's count of OOM kills, which redial reads on Linux
// only: here a SIGKILL may always be an OOM kill.
type oomCount struct{}

func oomCountFor(*exec.Cmd) oomCount { return oomCount{} }

func (*oomCount) since() evidence { return oomUnknown }

func (*oomCount) close() {}
