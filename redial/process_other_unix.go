//go:build unix && !linux

package redial

import "errors"

// waitExited is not available here (no waitid with WNOWAIT in x/sys/unix):
// the reaper reaps first and stops signalling just before.
func waitExited(int) error { return errors.ErrUnsupported }

// unreaped is never asked here: only Linux's I/O loop reaps with
// reapExited.
func unreaped(int) bool { return false }

// reapGroup is never asked here either.
func reapGroup(int) {}
