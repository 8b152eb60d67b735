// Health streams a dataset through a transform and prints the pipeline's
// health every second: rows/s, the data-stall fraction (time the training
// loop waited on sluice), mean queue depths and a diagnosis (io-bound,
// transform-bound, consumer-bound), the last three over the metrics window.
// With -listen it also serves the figures on /metrics for Prometheus and on
// /debug/vars (expvar).
//
// Each flag slows one stage, to show how each bottleneck reads:
//
//	go run ./examples/health -latency 200ms -transform 0  # io-bound: storage is slow
//	go run ./examples/health -transform 5ms               # transform-bound: the transform takes the cores
//	go run ./examples/health -transform 0 -step 5ms       # consumer-bound: the training step is slowest
//	go run ./examples/health -listen 127.0.0.1:9464       # and serve /metrics
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

	"github.com/sluicedata/sluice/examples/exampledata"
	"github.com/sluicedata/sluice/metrics"
	"github.com/sluicedata/sluice/metrics/prom"
	"github.com/sluicedata/sluice/storage"
	"github.com/sluicedata/sluice/stream"
)

func main() {
	var (
		data      = flag.String("data", "", "dataset URL or path (default: a generated one)")
		transform = flag.Duration("transform", time.Millisecond, "CPU time the transform spends per batch")
		step      = flag.Duration("step", 0, "time the training step spends per batch (a slow consumer)")
		latency   = flag.Duration("latency", 0, "time added to every storage read (a distant object store)")
		window    = flag.Duration("window", metrics.DefaultWindow, "how far back the diagnosis and the stall look")
		seconds   = flag.Duration("for", 5*time.Second, "how long to run")
		listen    = flag.String("listen", "", "serve /metrics and /debug/vars on this address (e.g. 127.0.0.1:9464)")
	)
	flag.Parse()
	if err := run(*data, *transform, *step, *latency, *window, *seconds, *listen); err != nil {
		log.Fatal(err)
	}
}

// slowBucket adds latency to every range read, as a distant object store would.
type slowBucket struct {
	storage.Bucket
	latency time.Duration
}

// Scheme is not "file", so that the stream counts the latency as a distant
// store's, not as a local read's CPU time.
func (b slowBucket) Scheme() string { return "slow" }

func (b slowBucket) ReadAt(ctx context.Context, obj storage.Object, p []byte, off int64) (int, error) {
	t := time.NewTimer(b.latency)
	defer t.Stop()
	select {
	case <-t.C:
		return b.Bucket.ReadAt(ctx, obj, p, off)
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

func run(data string, transform, step, latency, window, duration time.Duration, listen string) error {
	if data == "" {
		dir, err := os.MkdirTemp("", "sluice-health-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		if err := exampledata.Write(dir, exampledata.Spec{Files: 8, RowsPerFile: 250_000, RowGroupRows: 8192}); err != nil {
			return err
		}
		data = dir
	}
	ctx, cancel := context.WithTimeout(context.Background(), duration)
	defer cancel()
	opts := stream.Options{
		URLs:    []string{data},
		Shuffle: true,
		Seed:    1,
		Metrics: metrics.NewWithOptions(metrics.Options{Window: window}),
	}
	if latency > 0 {
		opts.Storage.Wrap = func(b storage.Bucket) storage.Bucket { return slowBucket{b, latency} }
	}
	ds, err := stream.Open(ctx, opts)
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

	// The health line, once a second: rows/s over the last second, the
	// diagnosis, stall and queue depths over the metrics window.
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
