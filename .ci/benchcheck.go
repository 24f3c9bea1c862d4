//go:build ignore

// benchcheck reads the output of `go test -bench` on stdin, copies it to
// stdout, and fails unless every benchmark result in it is a whole line
// that parses in the Go benchmark format (what benchstat reads): a name
// that begins with "Benchmark", an iteration count, then value-unit pairs.
// A line that begins with "Benchmark" and does not parse is a result that
// something else wrote into (a plugin's stderr line, say); a line that
// holds a result's numbers ("ns/op") without beginning with a name is the
// rest of such a result. benchstat drops both.
//
//	go test -run '^$' -bench . ./... 2>&1 | go run .ci/benchcheck.go
package main

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

func main() {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 0, 64*1024), 16*1024*1024)
	var results, bad int
	var first []string // the first bad lines, for the report
	for n := 1; in.Scan(); n++ {
		line := in.Text()
		fmt.Println(line)
		ok, isResult := parse(line)
		if !isResult {
			continue
		}
		results++
		if !ok {
			bad++
			if len(first) < 10 {
				first = append(first, fmt.Sprintf("line %d: %q", n, line))
			}
		}
	}
	if err := in.Err(); err != nil {
		fmt.Fprintf(os.Stderr, "benchcheck: reading the benchmark output: %v\n", err)
		os.Exit(1)
	}
	switch {
	case bad > 0:
		fmt.Fprintf(os.Stderr, "benchcheck: %d of %d benchmark result lines do not parse (benchstat would drop them):\n", bad, results)
		for _, l := range first {
			fmt.Fprintf(os.Stderr, "  %s\n", l)
		}
		os.Exit(1)
	case results == 0:
		fmt.Fprintln(os.Stderr, "benchcheck: no benchmark result in the output")
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "benchcheck: all %d benchmark result lines parse\n", results)
}

// parse reports whether line is a result line, or a piece of one, and
// whether it parses as a whole result.
func parse(line string) (ok, isResult bool) {
	f := strings.Fields(line)
	if len(f) == 0 {
		return false, false
	}
	if !isName(f[0]) {
		// The numbers of a result whose name was printed on a line of
		// its own, or was written over.
		return false, strings.Contains(line, " ns/op")
	}
	if len(f) < 4 || len(f)%2 != 0 {
		return false, true
	}
	if n, err := strconv.Atoi(f[1]); err != nil || n <= 0 {
		return false, true
	}
	for i := 2; i < len(f); i += 2 {
		if _, err := strconv.ParseFloat(f[i], 64); err != nil {
			return false, true
		}
	}
	return true, true
}

// isName reports whether s is a benchmark name: "Benchmark" followed by
// nothing or by a rune that is not lower case, as the format says.
func isName(s string) bool {
	rest, ok := strings.CutPrefix(s, "Benchmark")
	if !ok {
		return false
	}
	r, _ := utf8.DecodeRuneInString(rest)
	return rest == "" || !unicode.IsLower(r)
}
