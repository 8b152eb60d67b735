// Health streams a dataset through a transform and prints the pipeline's
// health every second: rows/s, the data-stall fraction (time the training
// loop waited on sluice), queue depths and a diagnosis (io-bound,
// transform-bound, consumer-bound). With -listen it also serves the figures
// on /metrics for Prometheus and on /debug/vars (expvar).
//
//	go run ./examples/health -transform 2ms -listen 127.0.0.1:9464
package main

import (
	"context"
	"expvar"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sluicedata/sluice/internal/synth"
	"github.com/sluicedata/sluice/metrics/prom"
	"github.com/sluicedata/sluice/stream"
)

func main() {
	var (
		data      = flag.String("data", "", "dataset URL or path (default: a generated one)")
		transform = flag.Duration("transform", time.Millisecond, "CPU time the transform spends per batch")
		step      = flag.Duration("step", 0, "time the training step spends per batch (a slow consumer)")
		seconds   = flag.Duration("for", 5*time.Second, "how long to run")
		listen    = flag.String("listen", "", "serve /metrics and /debug/vars on this address (e.g. 127.0.0.1:9464)")
	)
	flag.Parse()
	if err := run(*data, *transform, *step, *seconds, *listen); err != nil {
		log.Fatal(err)
	}
}

func run(data string, transform, step, duration time.Duration, listen string) error {
	if data == "" {
		dir, err := os.MkdirTemp("", "sluice-health-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		if err := synth.WriteDir(dir, synth.Spec{Files: 8, RowsPerFile: 250_000, RowGroupRows: 8192}); err != nil {
			return err
		}
		data = dir
	}
	ctx, cancel := context.WithTimeout(context.Background(), duration)
	defer cancel()
	ds, err := stream.Open(ctx, stream.Options{URLs: []string{data}, Shuffle: true, Seed: 1})
	if err != nil {
		return err
	}
	defer ds.Close()

	if listen != "" {
		reg := prometheus.NewRegistry()
		reg.MustRegister(prom.NewCollector(ds.Metrics(), prometheus.Labels{"dataset": "train"}))
		if err := ds.Metrics().PublishExpvar("sluice"); err != nil {
			return err
		}
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		mux.Handle("/debug/vars", expvar.Handler())
		srv := &http.Server{Addr: listen, Handler: mux}
		go srv.ListenAndServe()
		defer srv.Close()
		fmt.Printf("serving http://%s/metrics\n", listen)
	}

	// The health line, once a second, over the last second.
	go func() {
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		prev := ds.Metrics().Snapshot()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				now := ds.Metrics().Snapshot()
				fmt.Println(now.Since(prev))
				prev = now
			}
		}
	}()

	busy := func(_ context.Context, b arrow.RecordBatch) (int64, error) {
		end := time.Now().Add(transform)
		for time.Now().Before(end) {
		}
		return b.NumRows(), nil
	}
	for {
		for _, err := range stream.Map(ctx, ds, busy) {
			if err != nil {
				if ctx.Err() != nil {
					fmt.Println("final:", ds.Metrics().Snapshot())
					return nil
				}
				return err
			}
			time.Sleep(step)
		}
	}
}
