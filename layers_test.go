package respawn_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// above are the packages that compose redial with the call policy and
// health: no package under redial/ may depend on them.
var above = []string{
	"github.com/grpc-respawn/respawn",
	"github.com/grpc-respawn/respawn/goplugin",
	"github.com/grpc-respawn/respawn/health",
	"github.com/grpc-respawn/respawn/interceptor",
}

// TestRedialImportsNothingAbove: on every system a go-plugin host runs on,
// the packages under redial/ (the connection and its hooks) and all they
// import leave out the root package, interceptor, health and goplugin, as
// go list -deps reads them: the graph of a hook has no call policy in it.
func TestRedialImportsNothingAbove(t *testing.T) {
	for _, goos := range []string{"linux", "darwin", "windows"} {
		t.Run(goos, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, "go", "list", "-deps",
				"-f", "{{.ImportPath}}{{range .Imports}} {{.}}{{end}}", "./redial/...")
			cmd.Env = append(os.Environ(), "GOOS="+goos)
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("go list: %v\n%s", err, stderrOf(err))
			}
			for line := range strings.Lines(string(out)) {
				pkg, imports, _ := strings.Cut(strings.TrimSpace(line), " ")
				for imp := range strings.FieldsSeq(imports) {
					for _, a := range above {
						if imp == a {
							t.Errorf("%s imports %s: it is in the graph of ./redial/...", pkg, a)
						}
					}
				}
			}
		})
	}
}

func stderrOf(err error) []byte {
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.Stderr
	}
	return nil
}
