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

	"github.com/sluicedata/sluice/internal/testkit/scratch"
	"github.com/sluicedata/sluice/internal/testkit/synth"
	"github.com/sluicedata/sluice/storage"
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
	ranks, files := sharedPlanRanks, sharedPlanFiles
	if e.cfg.Mode == "tiny" { // the harness's own test: the lines, not the figures
		ranks, files = 4, 24
	}
	spec := synth.Spec{Files: files, RowsPerFile: 64, RowGroupRows: 64, Seed: 5}
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
		seconds, requests, err := e.openRanks(ctx, sc, ranks, shared)
		if err != nil {
			return fmt.Errorf("%s: %w", sharedPlanLines[i], err)
		}
		r := newRecord("scenario").set("scenario", sharedPlanLines[i])
		r.set("options", fmt.Sprintf("%d ranks (goroutines, each its own Open) at once, %d files of %d rows on the local S3 server, %d ms added to every read; seconds to the first batch of the last rank",
			ranks, len(paths), spec.RowsPerFile, sharedPlanLatency.Milliseconds()))
		r.set("measure", "latency").set("ranks", ranks).set("files", len(paths)).set("latency_ms", sharedPlanLatency.Milliseconds())
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
func (e *env) openRanks(ctx context.Context, sc *scratch.Prefix, ranks int, shared bool) (float64, int64, error) {
	runtime.GC()
	var requests atomic.Int64
	var counters []*storage.Counting
	var mu sync.Mutex
	key := fmt.Sprintf("%splan-%d.json", sc.Key, time.Now().UnixNano())
	start := time.Now()
	g, gctx := errgroup.WithContext(ctx)
	for rank := range ranks {
		g.Go(func() error {
			o := stream.Options{URLs: []string{sc.URL("")}, Rank: rank, WorldSize: ranks, BatchSize: e.cfg.BatchSize}
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
// (Consumers), each drained by its own goroutine, against one consumer
// at the same options, alternating; total rows/s is compared with n = 1's.
func (e *env) consumers(ctx context.Context) error {
	ns := []int{1, 2, 4}
	best := make([]sample, len(ns))
	for range max(e.cfg.Reps, 1) {
		for i, n := range ns {
			runtime.GC()
			m, err := e.consumeSplit(ctx, n)
			if err != nil {
				return fmt.Errorf("%s: %w", consumerLines[i], err)
			}
			best[i].rates = append(best[i].rates, m.rowsPerSec())
			if m.rowsPerSec() > best[i].m.rowsPerSec() {
				best[i].m = m
			}
			best[i].baseline = e.floor
		}
	}
	one := best[0].m.rowsPerSec()
	for i, n := range ns {
		r := e.result(consumerLines[i], best[i])
		r.set("options", fmt.Sprintf("defaults, NumSplits 4, Consumers(%d), each consumer drained by its own goroutine, alternating with the other n; total rows/s", n))
		r.set("consumers", n)
		r.set("one_consumer_rows_per_s", one).set("ratio_vs_1_consumer", best[i].m.rowsPerSec()/one)
		r.target("ratio_vs_1_consumer", ">=", 0.9)
		if err := e.emit(r); err != nil {
			return err
		}
	}
	return nil
}

// consumeSplit drains one epoch through n consumers, timed from the split.
func (e *env) consumeSplit(ctx context.Context, n int) (measurement, error) {
	var m measurement
	var read atomic.Int64
	o := e.opts()
	o.URLs, o.NumSplits = []string{e.data.dir}, 4
	o.Storage.Wrap = func(b storage.Bucket) storage.Bucket {
		c := storage.NewCounting(b)
		c.OnRead = func(_ string, _ int64, n int) { read.Add(int64(n)) }
		return c
	}
	ds, err := stream.Open(ctx, o)
	if err != nil {
		return m, err
	}
	defer ds.Close()
	for _, f := range ds.Files() {
		for _, u := range f.Units {
			m.storedBytes += u.Bytes
		}
	}
	m.planBytes = read.Load()
	cs, err := ds.Consumers(n)
	if err != nil {
		return m, err
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
		return m, err
	}
	m.seconds = time.Since(start).Seconds()
	m.rows = rows.Load()
	m.readBytes = read.Load() // planning included, as measureStream counts
	return m, expectRows(m, e.data.spec.Rows())
}
