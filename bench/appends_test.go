//go:build unix

package bench

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/grpc-respawn/respawn/internal/appendtest"
	"github.com/grpc-respawn/respawn/internal/plugintest"
)

// appendTally keeps what the callers of a chaos benchmark were told about
// their writes (Appends, or Uploads), each with an id of its own, to set
// against the plugin's journal. It is safe for concurrent use.
type appendTally struct {
	name        string // of the writes, "appends" or "uploads": the metrics' prefix
	mu          sync.Mutex
	acked       []string
	failed      []string
	interrupted int
	otherBytes  int            // acknowledged with other bytes stored than sent
	others      map[string]int // failures not interrupted, by error text
}

// add records the outcome of the Append with id.
func (a *appendTally) add(id string, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if err == nil {
		a.acked = append(a.acked, id)
		return
	}
	if errors.Is(err, errOtherBytes) {
		a.acked = append(a.acked, id)
		a.otherBytes++
		return
	}
	a.failed = append(a.failed, id)
	if appendtest.Interrupted(err) {
		a.interrupted++
		return
	}
	if a.others == nil {
		a.others = make(map[string]int)
	}
	a.others[errClass(err)]++
}

// counts returns how many Appends failed so far, and how many of them were
// interrupted in their handler.
func (a *appendTally) counts() (failed, interrupted int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.failed), a.interrupted
}

// errClass is err's text with the ids and numbers that vary from one call
// to the next cut out, so that failures of one kind count together.
func errClass(err error) string {
	s := err.Error()
	if len(s) > 200 {
		s = s[:200]
	}
	return strings.Map(func(r rune) rune {
		if r >= '0' && r <= '9' {
			return '#'
		}
		return r
	}, s)
}

// report checks the Appends against the journal at path, the ground truth
// (the ledger is what is under test), and reports per kill how many failed,
// how many of those were interrupted in their handler and how many of the
// failed had run all the same; and for the run how many ran more than once
// and how many were acknowledged but never ran. Those two must be 0 for
// every strategy: the benchmark fails otherwise. Failures other than an
// interruption are logged by kind when logOthers is set.
func (a *appendTally) report(b *testing.B, path string, kills, failedBefore, interruptedBefore int, logOthers bool) {
	j, err := plugintest.ReadJournal(path)
	if err != nil {
		b.Fatal(err)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	twice, lost, failedRan := 0, 0, 0
	for _, n := range j {
		if n > 1 {
			twice++
		}
	}
	for _, id := range a.acked {
		if j[id] == 0 {
			lost++
		}
	}
	for _, id := range a.failed[failedBefore:] {
		if j[id] > 0 {
			failedRan++
		}
	}
	b.ReportMetric(float64(twice), a.name+"_twice")
	b.ReportMetric(float64(lost), a.name+"_lost")
	if a.name == "uploads" {
		b.ReportMetric(float64(a.otherBytes), "uploads_other_bytes")
	}
	if kills > 0 {
		k := float64(kills)
		b.ReportMetric(float64(len(a.failed)-failedBefore)/k, a.name+"_failed/kill")
		b.ReportMetric(float64(a.interrupted-interruptedBefore)/k, a.name+"_interrupted/kill")
		b.ReportMetric(float64(failedRan)/k, a.name+"_failed_ran/kill")
	}
	if twice > 0 || lost > 0 || a.otherBytes > 0 {
		b.Errorf("of %d %s (%d acknowledged), the journal shows %d run more than once and %d acknowledged but never run; %d acknowledged with other bytes than sent",
			len(a.acked)+len(a.failed), a.name, len(a.acked), twice, lost, a.otherBytes)
	}
	if logOthers {
		for class, n := range a.others {
			b.Logf("%d %s failed, not interrupted in their handler: %s", n, a.name, class)
		}
	}
}

// appendID is the id of caller's n-th call.
func appendID(caller, n int) string { return fmt.Sprintf("c%d-%d", caller, n) }
