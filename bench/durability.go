package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/sluicedata/sluice/checkpoint/pebblestore"
	"github.com/sluicedata/sluice/internal/testkit/faults"
	"github.com/sluicedata/sluice/internal/testkit/synth"
	"github.com/sluicedata/sluice/storage"
	"github.com/sluicedata/sluice/stream"
)

// checkpointSave measures synced saves of a real state into the pebble store.
func (e *env) checkpointSave(ctx context.Context) error {
	o := e.opts()
	o.URLs, o.Shuffle, o.NumSplits = []string{e.data.dir}, true, 64
	ds, err := stream.Open(ctx, o)
	if err != nil {
		return err
	}
	defer ds.Close()
	dir, err := os.MkdirTemp("", "sluice-bench-ckpt-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	store, err := pebblestore.Open(dir, pebblestore.Options{})
	if err != nil {
		return err
	}
	defer store.Close()
	n := 500
	if e.cfg.Mode == "tiny" {
		n = 20
	}
	p50, p99, err := measureSaveLatency(ctx, store, "bench", n, ds.StateDict())
	if err != nil {
		return err
	}
	r := newRecord("scenario").set("scenario", "checkpoint_save").set("measure", "latency")
	r.set("saves", n).set("num_splits", o.NumSplits)
	r.set("p50_ms", float64(p50.Microseconds())/1000).set("p99_ms", float64(p99.Microseconds())/1000)
	r.set("store", "pebble, synced writes")
	return e.emit(r)
}

// resumeLatency measures open + load state + first batch at 1%, 50% and 99%
// of a shuffled epoch: resuming must cost the same wherever it is.
func (e *env) resumeLatency(ctx context.Context) error {
	o := e.opts()
	o.URLs, o.Shuffle, o.Seed, o.NumSplits = []string{e.data.dir}, true, 42, 8
	ds, err := stream.Open(ctx, o)
	if err != nil {
		return err
	}
	batches := int(e.data.spec.Rows() / int64(o.BatchSize))
	marks := []float64{0.01, 0.5, 0.99}
	states := map[float64]stream.State{}
	n := 0
	for _, err := range ds.Batches(ctx) {
		if err != nil {
			ds.Close()
			return err
		}
		n++
		for _, f := range marks {
			if n == max(1, int(f*float64(batches))) {
				states[f] = ds.StateDict()
			}
		}
		if n >= int(0.99*float64(batches)) {
			break
		}
	}
	ds.Close()
	// The positions take turns, so that every one sees the same machine:
	// the fastest of each is kept.
	lat := map[float64]time.Duration{}
	for range max(e.cfg.Reps, 5) {
		for _, f := range marks {
			st, ok := states[f]
			if !ok {
				return fmt.Errorf("no state taken at %.0f%% of the epoch", f*100)
			}
			start := time.Now()
			ds, err := stream.Open(ctx, o)
			if err != nil {
				return err
			}
			if err := ds.LoadStateDict(st); err != nil {
				ds.Close()
				return err
			}
			for _, err := range ds.Batches(ctx) {
				if err != nil {
					ds.Close()
					return err
				}
				break
			}
			took := time.Since(start)
			ds.Close()
			if best, ok := lat[f]; !ok || took < best {
				lat[f] = took
			}
		}
	}
	for _, f := range marks {
		r := newRecord("scenario").set("scenario", fmt.Sprintf("resume_%d", int(f*100))).set("measure", "latency")
		r.set("epoch_fraction", f).set("seconds", lat[f].Seconds()).set("what", "open, load state, first batch (fastest of reps, positions in turn)")
		if f == 0.99 {
			ratio := lat[0.99].Seconds() / lat[0.01].Seconds()
			r.set("ratio_vs_resume_1", ratio).set("target", "ratio_vs_resume_1 <= 1.5").set("met", ratio <= 1.5)
		}
		if err := e.emit(r); err != nil {
			return err
		}
	}
	return nil
}

// planning plans many small files with latency added to every request: cold,
// then with the plan cache in a pebble store.
func (e *env) planning(ctx context.Context) error {
	files := 2000
	if e.cfg.Mode == "tiny" {
		files = 50
	}
	dir, err := os.MkdirTemp("", "sluice-bench-plan-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if err := synth.WriteDir(filepath.Join(dir, "data"), synth.Spec{Files: files, RowsPerFile: 100, RowGroupRows: 50}); err != nil {
		return err
	}
	store, err := pebblestore.Open(filepath.Join(dir, "store"), pebblestore.Options{NoSync: true})
	if err != nil {
		return err
	}
	defer store.Close()
	kv, err := store.KV("plans")
	if err != nil {
		return err
	}
	latency := e.cfg.Latency
	for _, cached := range []bool{false, true} {
		o := stream.Options{URLs: []string{filepath.Join(dir, "data")}, PlanCache: kv}
		var counters []*storage.Counting // one per bucket the plan opens
		o.Storage.Wrap = func(b storage.Bucket) storage.Bucket {
			f := faults.New(b, 1)
			f.Latency = latency
			c := storage.NewCounting(f)
			counters = append(counters, c)
			return c
		}
		start := time.Now()
		ds, err := stream.Open(ctx, o)
		if err != nil {
			return err
		}
		secs := time.Since(start).Seconds()
		var requests int64
		for _, c := range counters {
			requests += c.Requests()
		}
		ds.Close()
		name, target := "plan_cold", 5.0
		if cached {
			name, target = "plan_cached", 0.3
		}
		r := newRecord("scenario").set("scenario", name).set("measure", "latency")
		r.set("files", files).set("latency_ms", latency.Milliseconds()).set("seconds", secs).set("requests", requests)
		r.set("target", fmt.Sprintf("seconds <= %g (for 2000 files)", target)).set("met", secs <= target)
		if err := e.emit(r); err != nil {
			return err
		}
	}
	return nil
}
