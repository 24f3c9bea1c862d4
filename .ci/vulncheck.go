//go:build ignore

// vulncheck reads `govulncheck -format json` on stdin and fails if the
// code calls a vulnerable function of a module (the go.mod's to fix). A
// vulnerable function of the standard library is reported as a warning:
// it is fixed by the Go toolchain CI runs with, not by this repository.
//
//	govulncheck -format json ./... | go run .ci/vulncheck.go
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
)

type message struct {
	Finding *struct {
		OSV   string `json:"osv"`
		Fixed string `json:"fixed_version"`
		Trace []struct {
			Module   string `json:"module"`
			Version  string `json:"version"`
			Function string `json:"function"`
		} `json:"trace"`
	} `json:"finding"`
}

func main() {
	dec := json.NewDecoder(os.Stdin)
	called := map[string]string{} // osv -> "module@version, fixed in ..."
	stdlib := map[string]string{}
	for {
		var m message
		err := dec.Decode(&m)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "vulncheck: reading govulncheck's output:", err)
			os.Exit(2)
		}
		f := m.Finding
		if f == nil || len(f.Trace) == 0 || f.Trace[0].Function == "" {
			continue // not called: the module or package is only required
		}
		what := fmt.Sprintf("%s@%s, fixed in %s", f.Trace[0].Module, f.Trace[0].Version, f.Fixed)
		if f.Trace[0].Module == "stdlib" {
			stdlib[f.OSV] = what
		} else {
			called[f.OSV] = what
		}
	}
	report := func(label string, m map[string]string) {
		ids := make([]string, 0, len(m))
		for id := range m {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		for _, id := range ids {
			fmt.Printf("%s %s: %s\n", label, id, m[id])
		}
	}
	report("WARNING (Go toolchain; upgrade Go):", stdlib)
	report("VULNERABLE (called):", called)
	if len(called) > 0 {
		fmt.Fprintf(os.Stderr, "vulncheck: the code calls %d known vulnerabilities in its modules: upgrade them\n", len(called))
		os.Exit(1)
	}
	fmt.Printf("vulncheck: no called vulnerability in the modules (%d in the Go toolchain)\n", len(stdlib))
}
