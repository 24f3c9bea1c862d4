//go:build !unix

package testplugin

import "time"

// processCPU is zero: this platform does not say.
func processCPU() time.Duration { return 0 }
