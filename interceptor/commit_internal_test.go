package interceptor

import (
	"testing"

	"google.golang.org/grpc"
)

// TestCommitTable: the commit rule, row by row, as the package
// documentation states it.
func TestCommitTable(t *testing.T) {
	server := &grpc.StreamDesc{ServerStreams: true}
	client := &grpc.StreamDesc{ClientStreams: true}
	bidi := &grpc.StreamDesc{ClientStreams: true, ServerStreams: true}
	for _, tc := range []struct {
		name  string
		event streamEvent
		// server, client, bidi
		want [3]bool
	}{
		{"a response header", headerReceived, [3]bool{false, true, true}},
		{"a response message", messageReceived, [3]bool{true, true, true}},
		{"the plugin's own end", endedByPlugin, [3]bool{true, true, true}},
		{"the Context taken", contextTaken, [3]bool{false, false, false}},
		{"the replay log full", bufferFull, [3]bool{true, true, true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for i, desc := range []*grpc.StreamDesc{server, client, bidi} {
				if got := commits(desc, tc.event); got != tc.want[i] {
					t.Errorf("%s on a %s stream commits: %v, want %v", tc.name, []string{"server", "client", "bidi"}[i], got, tc.want[i])
				}
			}
		})
	}
	if n := int(numStreamEvents); n != 5 {
		t.Errorf("%d events, the table test has 5 rows: add the new ones", n)
	}
}
