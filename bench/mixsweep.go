package main

import (
	"context"
	"fmt"
	"math"

	"github.com/sluicedata/sluice/stream"
)

// The mixcost scenario's sweep lines measure the three ways of buying
// mixing on the same data, one curve each in mixing_vs_memory.png: a larger
// window (ShuffleMemory), more passes over every row group at the default
// window (ShufflePasses), and both together. Each point is the whole
// epoch read once with the bench's mixing meter, the peak heap sampled
// through it, and the estimate Dataset.Estimate put on it before reading.

// sweepPoint is one setting of the sweep: passes over every chunk, and a
// ShuffleMemory of groups decoded row groups (0: the default window of
// 65,536 rows; sweepAll: the whole dataset and one row group more, so that
// one window holds it all).
type sweepPoint struct {
	passes, groups int
}

const sweepAll = -1

// sweepPoints, in the order they run: the memory family (one pass), the
// passes family (default window), and the two together.
var sweepPoints = []sweepPoint{
	{1, 1}, {1, 2}, {1, 4}, {1, 6}, {1, sweepAll},
	{2, 0}, {4, 0}, {8, 0},
	{2, 2}, {2, 4}, {2, sweepAll}, {4, 2}, {4, 4}, {4, sweepAll},
}

// family is the curve the point belongs to.
func (p sweepPoint) family() string {
	switch {
	case p.passes == 1:
		return "memory"
	case p.groups == 0:
		return "passes"
	}
	return "combined"
}

func (p sweepPoint) name(prefix string) string {
	mem := fmt.Sprintf("rg%d", p.groups)
	switch p.groups {
	case 0:
		mem = "default"
	case sweepAll:
		mem = "all"
	}
	return fmt.Sprintf("%s_sweep_p%d_%s", prefix, p.passes, mem)
}

// memory is the ShuffleMemory of the point on shape at rowBytes a decoded
// row: a little over its row groups' bytes, so that the rows they hold are
// never one short of them.
func (p sweepPoint) memory(shape tableShape, rowBytes float64) int64 {
	groups := p.groups
	if groups == sweepAll {
		groups = int(shape.rows()/int64(shape.RowGroupRows)) + 1
	}
	if groups == 0 {
		return 0
	}
	return int64(math.Ceil(float64(groups*shape.RowGroupRows)*rowBytes)) + 4096
}

// sweepLines are the sweep's lines of both data sets of mixcost.
func sweepLines() []string {
	var out []string
	for _, prefix := range []string{"pyarrow", "table131k"} {
		for _, p := range sweepPoints {
			out = append(out, p.name(prefix))
		}
	}
	return out
}

// mixSweep runs the sweep on dir (of shape, whose decoded rows are
// rowBytes each) and emits its lines, each compared with the sequential
// and default shuffled runs of the same data.
func (e *env) mixSweep(ctx context.Context, prefix, dir string, shape tableShape, rowBytes float64, seq, shuffled *mixSample) error {
	runs := make([]mixRun, len(sweepPoints))
	for i, p := range sweepPoints {
		mem := p.memory(shape, rowBytes)
		about := fmt.Sprintf("Shuffle, Seed 42, BatchSize 1024, ShufflePasses %d", p.passes)
		if mem > 0 {
			about += fmt.Sprintf(", ShuffleMemory %d (%s)", mem, humanSize(mem))
		}
		runs[i] = mixRun{p.name(prefix), about, stream.Options{BatchSize: 1024, Shuffle: true, Seed: 42, ShufflePasses: p.passes, ShuffleMemory: mem}}
	}
	got := make([]mixSample, len(runs))
	for range max(e.cfg.Reps, 1) {
		for i, r := range runs {
			if err := got[i].run(ctx, dir, r, shape.rows()); err != nil {
				return err
			}
		}
	}
	for i, r := range runs {
		g := got[i]
		rec := e.result(r.name, e.single(g.best))
		rec.set("options", r.about)
		rec.set("family", sweepPoints[i].family())
		rec.set("shuffle_passes", sweepPoints[i].passes)
		rec.set("shuffle_memory", r.opts.ShuffleMemory)
		g.setPrice(rec, r.opts)
		rec.set("sequential_rows_per_s", seq.best.rowsPerSec())
		rec.set("ratio_vs_sequential", g.best.rowsPerSec()/seq.best.rowsPerSec())
		rec.set("peak_heap_vs_shuffled", float64(g.heap)/float64(shuffled.heap))
		if err := e.emit(rec); err != nil {
			return err
		}
	}
	return nil
}

// setPrice sets the line's estimate fields (Dataset.Estimate, before any
// row is read) and its measured peak heap.
func (s *mixSample) setPrice(rec *record, o stream.Options) {
	rec.set("window_rows", s.est.WindowRows)
	rec.set("window_places", s.est.MeanPlaces)
	rec.set("window_bytes_estimate", s.est.WindowBytes)
	rec.set("window_peak_estimate", s.est.PeakBytes(o.Shuffle))
	rec.set("decoders_peak_estimate", s.est.DecodersPeakBytes)
	if s.est.Mixing >= 0 {
		rec.set("mixing_estimate", s.est.Mixing)
	}
	rec.set("peak_heap_bytes", s.heap)
	rec.set("peak_heap_runs", s.heaps)
}
