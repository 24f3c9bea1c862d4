package bench

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/grpc-respawn/respawn/internal/testpb"
	"github.com/grpc-respawn/respawn/redial"
	"github.com/grpc-respawn/respawn/redial/command"
)

// restartable re-implements Velero's restartable plugin process
// (pkg/plugin/clientmgmt/process/restartable_process.go and the
// restartable* delegates), the strategy respawn is compared with:
//
//   - before every call, getDelegate takes the process lock and, if the
//     plugin process has exited (go-plugin's Client.Exited: its cmd.Wait
//     returned, i.e. it was reaped), resets it: launches a new plugin,
//     dials it and re-dispenses the client, all while holding the lock;
//   - the call itself goes to the delegate as is: a call that fails
//     because the plugin died is returned to the caller, never retried;
//   - more than 10 failed resets in a row is a permanent error.
//
// Launching and dialling use the same command.Hook and grpc.NewClient as
// the other strategies, so only the policy differs.
type restartable struct {
	cmd       *command.Hook
	onRespawn func(time.Time)

	mu            sync.Mutex
	backend       redial.Backend
	cc            *grpc.ClientConn
	client        testpb.TestClient
	resetFailures int

	relaunches atomic.Int64
	retired    sync.WaitGroup
}

var errResetFailures = errors.New("unable to restart plugin process: exceeded maximum number of reset failures")

func newRestartable(cmd *command.Hook, onRespawn func(time.Time)) (*restartable, error) {
	r := &restartable{cmd: cmd, onRespawn: onRespawn}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r, r.launchLH()
}

// launchLH is Velero's newProcess plus dispense. r.mu is held.
func (r *restartable) launchLH() error {
	// go-plugin bounds a launch with ClientConfig.StartTimeout; this is
	// its stand-in.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	b, err := r.cmd.Respawn(ctx, redial.Request{})
	if err != nil {
		return err
	}
	cc, err := grpc.NewClient(b.Target, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		_ = b.Stop()
		return err
	}
	r.backend, r.cc, r.client = b, cc, testpb.NewTestClient(cc)
	return nil
}

// resetLH replaces an exited plugin. r.mu is held.
func (r *restartable) resetLH() error {
	if r.resetFailures > 10 {
		return errResetFailures
	}
	old, oldCC := r.backend, r.cc
	if err := r.launchLH(); err != nil {
		r.resetFailures++
		return err
	}
	r.resetFailures = 0
	r.relaunches.Add(1)
	if r.onRespawn != nil {
		r.onRespawn(time.Now())
	}
	// Velero leaves the dead client alone; we release it off the call path
	// so that the cleanup costs the strategy nothing.
	r.retired.Add(1)
	go func() {
		defer r.retired.Done()
		_ = oldCC.Close()
		_ = old.Stop()
	}()
	return nil
}

// delegate is Velero's getDelegate: ResetIfNeeded, then the dispensed
// client.
func (r *restartable) delegate() (testpb.TestClient, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, exited := r.backend.Process.Exit(); exited {
		if err := r.resetLH(); err != nil {
			return nil, err
		}
	}
	return r.client, nil
}

// Get is a restartable delegate method: no retry.
func (r *restartable) Get(ctx context.Context, req *testpb.GetRequest) (*testpb.GetResponse, error) {
	c, err := r.delegate()
	if err != nil {
		return nil, err
	}
	return c.Get(ctx, req)
}

// Append is a restartable delegate method: no retry.
func (r *restartable) Append(ctx context.Context, req *testpb.AppendRequest) (*testpb.AppendResponse, error) {
	c, err := r.delegate()
	if err != nil {
		return nil, err
	}
	return c.Append(ctx, req)
}

// process returns the current plugin process.
func (r *restartable) process() *redial.Process {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.backend.Process
}

// Close kills and reaps the current plugin and waits for retired ones.
func (r *restartable) Close() {
	r.mu.Lock()
	_ = r.cc.Close()
	_ = r.backend.Stop()
	r.mu.Unlock()
	r.retired.Wait()
}
