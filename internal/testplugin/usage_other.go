//go:build !unix

package testplugin

import "time"

// ProcessCPU is zero: this platform does not say.
func ProcessCPU() (time.Duration, error) { return 0, nil }
