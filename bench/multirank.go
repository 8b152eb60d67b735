package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/sluicedata/sluice/formats/storage"
	"github.com/sluicedata/sluice/internal/scratch"
	"github.com/sluicedata/sluice/internal/synth"
	"github.com/sluicedata/sluice/stream"
)

// The shared-plan measurement: sharedPlanRanks ranks (goroutines of this
// process, each its own stream.Open with its own buckets, as processes
// would be) open a dataset of sharedPlanFiles small files on the local S3
// server at once, with sharedPlanLatency added to every read, and take
// their first batch.
const (
	sharedPlanRanks   = 64
	sharedPlanFiles   = 2000
	sharedPlanLatency = 20 * time.Millisecond
)

var sharedPlanLines = []string{"shared_plan_off", "shared_plan_on"}

// sharedPlan measures the time to the first batch of the last of the ranks
// and the requests they made, every rank reading every footer
// (shared_plan_off) and with a PlanStore, rank 0 reading them and the
// others the plan (shared_plan_on).
func (e *env) sharedPlan(ctx context.Context) (err error) {
	if scratch.S3.URL() == "" {
		for _, l := range sharedPlanLines {
			if err := e.emit(newRecord("scenario").set("scenario", l).set("skipped", "run "+scratch.Setup)); err != nil {
				return err
			}
		}
		return nil
	}
	sc, err := scratch.New(ctx, scratch.S3, "sluice-bench-shared-plan")
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Minute)
		defer cancel()
		if cerr := sc.Close(cctx); err == nil {
			err = cerr
		}
	}()
	spec := synth.Spec{Files: sharedPlanFiles, RowsPerFile: 64, RowGroupRows: 64, Seed: 5}
	local, err := os.MkdirTemp("", "sluice-bench-shared-plan-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(local)
	if err := synth.WriteDir(local, spec); err != nil {
		return err
	}
	paths, err := filepath.Glob(filepath.Join(local, "*.parquet"))
	if err != nil {
		return err
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(16)
	for _, p := range paths {
		g.Go(func() error { return upload(gctx, sc, p) })
	}
	if err := g.Wait(); err != nil {
		return err
	}
	for i, shared := range []bool{false, true} {
		seconds, requests, err := e.openRanks(ctx, sc, shared)
		if err != nil {
			return fmt.Errorf("%s: %w", sharedPlanLines[i], err)
		}
		r := newRecord("scenario").set("scenario", sharedPlanLines[i])
		r.set("options", fmt.Sprintf("%d ranks (goroutines, each its own Open) at once, %d files of %d rows on the local S3 server, %d ms added to every read; seconds to the first batch of the last rank",
			sharedPlanRanks, len(paths), spec.RowsPerFile, sharedPlanLatency.Milliseconds()))
		r.set("ranks", sharedPlanRanks).set("files", len(paths)).set("latency_ms", sharedPlanLatency.Milliseconds())
		r.set("seconds", seconds).set("requests", requests)
		r.set("plan_store_requests", "not counted: the plan object is read once per rank, polled while rank 0 plans, with no added latency")
		if err := e.emit(r); err != nil {
			return err
		}
	}
	return nil
}

// openRanks opens the dataset on every rank at once and returns the
// seconds until the last rank had its first batch, and the requests all
// ranks made to the data bucket.
func (e *env) openRanks(ctx context.Context, sc *scratch.Prefix, shared bool) (float64, int64, error) {
	runtime.GC()
	var requests atomic.Int64
	var counters []*storage.Counting
	var mu sync.Mutex
	key := fmt.Sprintf("%splan-%d.json", sc.Key, time.Now().UnixNano())
	start := time.Now()
	g, gctx := errgroup.WithContext(ctx)
	for rank := range sharedPlanRanks {
		g.Go(func() error {
			o := stream.Options{URLs: []string{sc.URL("")}, Rank: rank, WorldSize: sharedPlanRanks, BatchSize: e.cfg.BatchSize}
			o.Storage.Wrap = func(b storage.Bucket) storage.Bucket {
				c := storage.NewCounting(withLatency(b, sharedPlanLatency))
				mu.Lock()
				counters = append(counters, c)
				mu.Unlock()
				return c
			}
			if shared {
				o.PlanStore = &stream.PlanStore{Bucket: sc.Bucket, Key: key}
			}
			ds, err := stream.Open(gctx, o)
			if err != nil {
				return fmt.Errorf("rank %d: %w", rank, err)
			}
			defer ds.Close()
			for _, err := range ds.Batches(gctx) {
				if err != nil {
					return fmt.Errorf("rank %d: %w", rank, err)
				}
				break
			}
			return nil
		})
	}
	err := g.Wait()
	seconds := time.Since(start).Seconds()
	for _, c := range counters {
		requests.Add(c.Requests())
	}
	return seconds, requests.Load(), err
}

var consumerLines = []string{"consumers_1", "consumers_2", "consumers_4"}

// consumers streams the dataset through n consumers of one rank
// (StreamingSplit), each drained by its own goroutine, against one consumer
// at the same options, alternating; total rows/s is compared with n = 1's.
func (e *env) consumers(ctx context.Context) error {
	ns := []int{1, 2, 4}
	best := make([]float64, len(ns))
	runs := make([][]float64, len(ns))
	for range max(e.cfg.Reps, 1) {
		for i, n := range ns {
			runtime.GC()
			rate, err := e.consumeSplit(ctx, n)
			if err != nil {
				return fmt.Errorf("%s: %w", consumerLines[i], err)
			}
			best[i] = max(best[i], rate)
			runs[i] = append(runs[i], round(rate))
		}
	}
	for i, n := range ns {
		r := newRecord("scenario").set("scenario", consumerLines[i])
		r.set("options", fmt.Sprintf("defaults, NumSplits 4, StreamingSplit(%d, false), each consumer drained by its own goroutine; total rows/s", n))
		r.set("consumers", n).set("rows_per_s", best[i]).set("runs_rows_per_s", runs[i])
		r.set("one_consumer_rows_per_s", best[0]).set("ratio_vs_1_consumer", best[i]/best[0])
		r.target("ratio_vs_1_consumer", ">=", 0.9)
		if err := e.emit(r); err != nil {
			return err
		}
	}
	return nil
}

// consumeSplit drains one epoch through n consumers and returns rows/s.
func (e *env) consumeSplit(ctx context.Context, n int) (float64, error) {
	o := e.opts()
	o.URLs, o.NumSplits = []string{e.data.dir}, 4
	ds, err := stream.Open(ctx, o)
	if err != nil {
		return 0, err
	}
	defer ds.Close()
	cs, err := ds.StreamingSplit(n, false)
	if err != nil {
		return 0, err
	}
	var rows atomic.Int64
	start := time.Now()
	g, gctx := errgroup.WithContext(ctx)
	for _, c := range cs {
		g.Go(func() error {
			defer c.Close()
			for b, err := range c.Batches(gctx) {
				if err != nil {
					return err
				}
				rows.Add(b.NumRows())
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return 0, err
	}
	el := time.Since(start).Seconds()
	if err := expectRows(measurement{rows: rows.Load()}, e.data.spec.Rows()); err != nil {
		return 0, err
	}
	return float64(rows.Load()) / el, nil
}
