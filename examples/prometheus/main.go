// Command prometheus shows respawn's metrics in Prometheus: it starts a
// plugin (this binary, exec'd with RESPAWN_PROMETHEUS_EXAMPLE_PLUGIN=1),
// calls it, makes it crash in the middle of a call (the call is retried on a
// fresh plugin), kills that one from outside and calls again, and prints the respawn_* metrics a scrape of /metrics returns.
// With -listen it then serves /metrics there until interrupted. Run it from
// this directory:
//
//	go run . [-listen 127.0.0.1:9464]
//
// Copy [Metrics] and [StatsCollector] into a host: they depend on redial and
// client_golang only.
//
// This directory is a module of its own, so that respawn's go.mod does not
// require client_golang. Its go.mod replaces respawn with the checkout it
// sits in (../..). Copied out of the repository, point that replace at a
// checkout of respawn, or drop it and require a published version:
//
//	go mod edit -replace github.com/grpc-respawn/respawn=/path/to/respawn
//	go mod edit -dropreplace github.com/grpc-respawn/respawn && go get github.com/grpc-respawn/respawn@latest
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/expfmt"

	"github.com/grpc-respawn/respawn/interceptor"
	"github.com/grpc-respawn/respawn/redial"
	"github.com/grpc-respawn/respawn/redial/command"
)

func main() {
	if os.Getenv(pluginEnv) == "1" {
		if err := servePlugin(); err != nil {
			fmt.Fprintln(os.Stderr, "plugin:", err)
			os.Exit(1)
		}
		return
	}
	listen := flag.String("listen", "", "after the demo, serve /metrics on this address until interrupted")
	flag.Parse()
	if err := run(*listen); err != nil {
		fmt.Fprintln(os.Stderr, "prometheus example:", err)
		os.Exit(1)
	}
}

func run(listen string) error {
	reg := prometheus.NewRegistry()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	err := demo(ctx, reg, os.Stdout)
	cancel()
	if err != nil {
		return err
	}
	families, err := reg.Gather()
	if err != nil {
		return err
	}
	for _, mf := range families {
		if strings.HasPrefix(mf.GetName(), "respawn_") {
			if _, err := expfmt.MetricFamilyToText(os.Stdout, mf); err != nil {
				return err
			}
		}
	}
	if listen == "" {
		return nil
	}
	srv := &http.Server{Addr: listen, Handler: promhttp.HandlerFor(reg, promhttp.HandlerOpts{}), ReadHeaderTimeout: 5 * time.Second}
	stop, unstop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer unstop()
	go func() {
		<-stop.Done()
		_ = srv.Close()
	}()
	fmt.Printf("serving http://%s/metrics; interrupt to stop\n", listen)
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// demo registers the metrics with reg, starts the plugin, calls it, crashes
// it in a call, kills its successor, calls again and closes the Conn, then
// waits for the event handler to see the last event, EventClosed: a scrape
// of reg after demo shows them all.
func demo(ctx context.Context, reg *prometheus.Registry, out io.Writer) error {
	metrics, err := NewMetrics(reg)
	if err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	hook := &command.Hook{Path: self, Env: append(os.Environ(), pluginEnv+"=1"), Stderr: os.Stderr}
	const name = "who"
	closed := make(chan struct{}) // closed with the last event
	conn, err := redial.New(hook,
		redial.WithName(name),
		redial.WithPolicy(interceptor.New(interceptor.WithIdempotentMethods(whoMethod))),
		redial.WithEventHandler(func(e redial.Event) {
			metrics.Handle(e)
			if e.Kind == redial.EventClosed {
				close(closed)
			}
		}))
	if err != nil {
		return err
	}
	defer conn.Close()
	if err := reg.Register(NewStatsCollector(name, conn)); err != nil {
		return err
	}
	if err := conn.Connect(ctx); err != nil {
		return err
	}
	pid, err := who(ctx, conn, "who")
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "plugin pid %s answered; asking it to crash in the next call\n", pid)
	if pid, err = who(ctx, conn, "crash "+pid); err != nil {
		return err
	}
	fmt.Fprintf(out, "the call was retried: plugin pid %s answered; killing it from outside\n", pid)
	if err := kill(ctx, conn.Current().Process()); err != nil {
		return err
	}
	if pid, err = who(ctx, conn, "who"); err != nil {
		return err
	}
	fmt.Fprintf(out, "plugin pid %s answered the next call\n", pid)
	err = conn.Close()
	<-closed
	return err
}

// kill kills p from outside, as the OOM killer would, and waits for it to
// be reaped.
func kill(ctx context.Context, p *redial.Process) error {
	if p == nil {
		return errors.New("the plugin has no process")
	}
	proc, err := os.FindProcess(p.PID)
	if err != nil {
		return err
	}
	if err := proc.Kill(); err != nil {
		return err
	}
	select {
	case <-p.Done():
		return nil
	case <-ctx.Done():
		return fmt.Errorf("plugin pid %d not reaped: %w", p.PID, ctx.Err())
	}
}
