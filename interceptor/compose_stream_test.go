//go:build unix

package interceptor_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/retry"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grpc-respawn/respawn/interceptor"
	"github.com/grpc-respawn/respawn/internal/respawntest"
	"github.com/grpc-respawn/respawn/internal/testpb"
	"github.com/grpc-respawn/respawn/redial"
)

// streamChain is a policy whose stream chain is mw's stream retry with
// retryOpts outside respawn's stream interceptor, or, with no retryOpts,
// respawn's alone.
func streamChain(retryOpts ...retry.CallOption) func(h redial.Handle) []grpc.DialOption {
	return func(h redial.Handle) []grpc.DialOption {
		var is []grpc.StreamClientInterceptor
		if len(retryOpts) > 0 {
			is = append(is, retry.StreamClientInterceptor(retryOpts...))
		}
		is = append(is, interceptor.New().StreamClientInterceptor(h))
		return []grpc.DialOption{grpc.WithChainStreamInterceptor(is...), grpc.WithDisableRetry()}
	}
}

// TestComposeServerStreamKilledMidStream: a server stream whose plugin
// dies after the caller got message 0 ends with ErrStreamBroken
// (Aborted) and is never replayed from its start: not by respawn, and not
// by mw's stream retry outside respawn, with respawn's predicate or with its
// default codes. (To go on without a repeat, use interceptor.WithResume.)
func TestComposeServerStreamKilledMidStream(t *testing.T) {
	for _, tt := range []struct {
		name  string
		retry []retry.CallOption
		want  []int64 // the seqs the caller receives
	}{
		{"respawn alone", nil, []int64{0}},
		{"mw stream retry outside, with Retriable", []retry.CallOption{retry.WithMax(3), retry.WithRetriable(interceptor.Retriable)}, []int64{0}},
		{"mw stream retry outside, default codes", []retry.CallOption{retry.WithMax(3)}, []int64{0}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := newHost(t, nil, []redial.Option{withPolicy(respawntest.PolicyFunc(streamChain(tt.retry...)))})
			ctx := respawntest.Context(t, 20*time.Second)
			stream, err := h.client.Watch(ctx, &testpb.WatchRequest{Id: "s", Count: 3, IntervalMs: 1000})
			if err != nil {
				t.Fatal(err)
			}
			var got []int64
			m, err := stream.Recv()
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, m.GetSeq())
			respawntest.Kill(t, h.rc.Current())
			for {
				if m, err = stream.Recv(); err != nil {
					break
				}
				got = append(got, m.GetSeq())
			}
			t.Logf("received %v, then %v", got, err)
			if !slices.Equal(got, tt.want) {
				t.Errorf("received seqs %v, want %v", got, tt.want)
			}
			if !errors.Is(err, interceptor.ErrStreamBroken) || status.Code(err) != codes.Aborted {
				t.Errorf("stream ended with %v, want ErrStreamBroken (Aborted)", err)
			}
		})
	}
}
