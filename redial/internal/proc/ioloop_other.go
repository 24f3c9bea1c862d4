//go:build !linux

package proc

import (
	"io"
	"os"
)

// readPipes reads the plugin's pipes and reaps it, a goroutine each.
func readPipes(g *group, stdout, stderr *os.File, limit int, w io.Writer) <-chan Line {
	return readWithGoroutines(g, stdout, stderr, limit, w)
}
