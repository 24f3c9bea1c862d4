package redial

import (
	"context"
	"net"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
)

// TestWaitReadyEndsAtTheExit: a launch waiting for its plugin's connection
// to be READY ends when the plugin's exit is reported, with the exit as
// its error, and no goroutine waits for that exit meanwhile: the exit
// signal itself cancels the wait.
func TestWaitReadyEndsAtTheExit(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// A listener that accepts and never answers: the connection stays
	// CONNECTING, waiting for the server's preface.
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	held := make(chan net.Conn, 4)
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				close(held)
				return
			}
			held <- c
		}
	}()
	defer func() {
		_ = lis.Close()
		for c := range held {
			_ = c.Close()
		}
	}()
	cc, err := grpc.NewClient("passthrough:///"+lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()

	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p, report := NewProcess(cmd.Process.Pid, nil)
	done := make(chan error, 1)
	go func() { done <- waitReady(ctx, cc, p) }()
	// waitReady asks the IDLE connection to connect once it waits.
	if !cc.WaitForStateChange(ctx, connectivity.Idle) {
		t.Fatal("the connection never left IDLE")
	}
	buf := make([]byte, 1<<20)
	if stacks := string(buf[:runtime.Stack(buf, true)]); strings.Contains(stacks, "redial.waitReady.func") {
		t.Error("a goroutine of waitReady waits for the exit")
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	report(Exit{PID: cmd.Process.Pid, Code: -1, Signal: syscall.SIGKILL})
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "killed by signal 9") {
			t.Errorf("waitReady: %v, want the exit", err)
		}
	case <-ctx.Done():
		t.Fatal("waitReady did not end at the exit")
	}
}
