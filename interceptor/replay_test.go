package interceptor_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/grpc-respawn/respawn/interceptor"
	"github.com/grpc-respawn/respawn/internal/respawntest"
	"github.com/grpc-respawn/respawn/internal/testpb"
	"github.com/grpc-respawn/respawn/internal/testplugin"
)

// TestReplaysAreVisible: a retry tells the plugin it is one, and with
// WithCallIDs every attempt of a call carries the same id, so that a plugin
// can deduplicate.
func TestReplaysAreVisible(t *testing.T) {
	for _, tc := range []struct {
		name    string
		opts    []interceptor.Option
		callIDs bool
	}{
		{"default", nil, false},
		{"WithCallIDs", []interceptor.Option{interceptor.WithCallIDs()}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHost(t, nil, nil, tc.opts...)
			err := h.killMidCall(t, "r", func(ctx context.Context) error {
				_, err := h.client.Get(ctx, &testpb.GetRequest{Id: "r", DelayMs: 1000})
				return err
			})
			if err != nil {
				t.Fatalf("Get killed mid-call: %v", err)
			}
			data, err := os.ReadFile(h.journal + testplugin.MetaSuffix)
			if err != nil {
				t.Fatal(err)
			}
			// "<id> <attempt> <call id>", "-" for none.
			var attempts, ids []string
			for line := range strings.Lines(string(data)) {
				f := strings.Fields(line)
				if len(f) == 3 && f[0] == "r" {
					attempts, ids = append(attempts, f[1]), append(ids, f[2])
				}
			}
			want := []string{"1"}
			if tc.callIDs {
				want = []string{"-", "1"} // the first attempt is journalled for its call id
			}
			if strings.Join(attempts, ",") != strings.Join(want, ",") {
				t.Errorf("attempt headers %q, want %q", attempts, want)
			}
			switch {
			case !tc.callIDs && ids[len(ids)-1] != "-":
				t.Errorf("call id %q without WithCallIDs", ids[len(ids)-1])
			case tc.callIDs && (ids[0] == "-" || ids[0] != ids[len(ids)-1]):
				t.Errorf("call ids %q, want one id on every attempt", ids)
			}
		})
	}
}

// TestCallIDWhenPluginGone: a call made while its plugin is known dead is
// not sent to it but waits for the successor, and still carries its call id.
func TestCallIDWhenPluginGone(t *testing.T) {
	h := newHost(t, []string{"-start-delay", "300ms"}, nil, interceptor.WithCallIDs())
	respawntest.Kill(t, h.rc.Current())
	if _, err := h.client.Get(respawntest.Context(t, 20*time.Second), &testpb.GetRequest{Id: "g"}); err != nil {
		t.Fatalf("Get while the plugin is gone: %v", err)
	}
	data, err := os.ReadFile(h.journal + testplugin.MetaSuffix)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for line := range strings.Lines(string(data)) {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "g" {
			ids = append(ids, f[2])
		}
	}
	if len(ids) != 1 || ids[0] == "-" {
		t.Errorf("call ids journalled for the call %q, want one id", ids)
	}
}
