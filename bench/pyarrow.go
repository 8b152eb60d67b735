package main

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"time"

	"github.com/sluicedata/sluice/stream"
)

// The mixcost scenario measures what mixing costs on files as they are:
// data shaped like the issue 16 table but written as pyarrow writes by
// default (row groups of 1,048,576 rows, 1 MiB pages, no page index,
// Snappy, label sorted), and the same four lines on the table data of
// 131,072-row groups. Each data set is streamed sequentially, shuffled at
// the defaults, and shuffled with the setting that buys a mixing of 0.15
// or less and of 0.05 or less. Those settings are what a user would pick
// (settingsFor): of ShuffleMemory in steps of whole decoded row groups and
// ShufflePasses 1 to 3, the one of least estimated peak that
// Dataset.Estimate (sluice inspect) prices at or under the target, before
// any data is read; the lines then measure the mixing, memory and speed
// they get. The sweep lines (mixsweep.go) measure the settings around
// them.

// mixCostLines are the lines of the mixcost scenario.
var mixCostLines = []string{
	"pyarrow_sequential", "pyarrow_shuffled", "pyarrow_shuffled_mix15", "pyarrow_shuffled_mix05",
	"table131k_sequential", "table131k_shuffled", "table131k_shuffled_mix15", "table131k_shuffled_mix05",
}

// pyarrowShapeFor is the pyarrow-shaped data of a mode: 8M rows in 4 files
// of two row groups in quick mode, 16M in full; tiny keeps the shape at a
// few thousand rows, with row groups of 4096.
func pyarrowShapeFor(mode string) tableShape {
	switch mode {
	case "tiny":
		return tableShape{Files: 2, RowsPerFile: 8192, RowGroupRows: 4096}
	case "quick":
		return tableShape{Files: 4, RowsPerFile: 2 << 20, RowGroupRows: 1 << 20}
	}
	return tableShape{Files: 8, RowsPerFile: 2 << 20, RowGroupRows: 1 << 20}
}

// smallGroups is shape s in the table data's row groups (131,072 rows,
// a quarter of s's in tiny mode): the same rows, for peak_heap_vs_small_groups.
func smallGroups(s tableShape, mode string) tableShape {
	s.RowGroupRows = 131_072
	if mode == "tiny" {
		s.RowGroupRows = 1024
	}
	return s
}

// mixTargets are the mixing figures the mix lines buy.
var mixTargets = []struct {
	suffix string
	mixing float64
}{{"mix15", 0.15}, {"mix05", 0.05}}

// mixRun is one line's settings.
type mixRun struct {
	name  string
	about string
	opts  stream.Options
}

func (e *env) mixCostScenario(ctx context.Context) error {
	py := pyarrowShapeFor(e.cfg.Mode)
	if err := e.mixCost(ctx, "pyarrow", py, smallGroups(py, e.cfg.Mode)); err != nil {
		return err
	}
	return e.mixCost(ctx, "table131k", tableShapeFor(e.cfg.Mode), tableShape{})
}

// mixCost runs the four lines of prefix on shape, and, where small has
// files, the sequential and default shuffled runs on those too.
func (e *env) mixCost(ctx context.Context, prefix string, shape, small tableShape) error {
	dir, err := writeTable(ctx, e, shape)
	if err != nil {
		return err
	}
	var smallDir string
	if small.Files > 0 {
		if smallDir, err = writeTable(ctx, e, small); err != nil {
			return err
		}
	}
	runs := []mixRun{
		{prefix + "_sequential", "BatchSize 8192", stream.Options{BatchSize: 8192}},
		{prefix + "_shuffled", "Shuffle, Seed 42, BatchSize 1024", stream.Options{BatchSize: 1024, Shuffle: true, Seed: 42}},
	}
	settings, sweep, err := e.settingsFor(ctx, dir, shape)
	if err != nil {
		return err
	}
	for i, t := range mixTargets {
		s := settings[i]
		about := fmt.Sprintf("Shuffle, Seed 42, BatchSize 1024, ShuffleMemory %d (%s)", s.memory, humanSize(s.memory))
		if s.passes > 1 {
			about += fmt.Sprintf(", ShufflePasses %d", s.passes)
		}
		runs = append(runs, mixRun{prefix + "_shuffled_" + t.suffix, about,
			stream.Options{BatchSize: 1024, Shuffle: true, Seed: 42, ShuffleMemory: s.memory, ShufflePasses: s.passes}})
	}
	got := make([]mixSample, len(runs))
	var smallGot [2]mixSample
	for range max(e.cfg.Reps, 1) {
		for i, r := range runs {
			if err := got[i].run(ctx, dir, r, shape.rows()); err != nil {
				return err
			}
			if smallDir != "" && i < len(smallGot) {
				if err := smallGot[i].run(ctx, smallDir, r, shape.rows()); err != nil {
					return fmt.Errorf("%s on %d-row groups: %w", r.name, small.RowGroupRows, err)
				}
			}
		}
	}
	for i, r := range runs {
		g := got[i]
		rec := e.result(r.name, e.single(g.best))
		rec.set("options", r.about)
		rec.set("columns", "all")
		rec.set("data", pyarrowDescription(shape))
		if i > 0 {
			rec.set("shuffle_passes", max(r.opts.ShufflePasses, 1))
			rec.set("shuffle_memory", r.opts.ShuffleMemory)
		}
		g.setPrice(rec, r.opts)
		if i > 0 {
			rec.set("sequential_rows_per_s", got[0].best.rowsPerSec())
			rec.set("ratio_vs_sequential", g.best.rowsPerSec()/got[0].best.rowsPerSec())
		}
		if i < len(smallGot) && smallDir != "" {
			rec.set("small_groups_peak_heap_bytes", smallGot[i].heap)
			rec.set("peak_heap_vs_small_groups", float64(g.heap)/float64(smallGot[i].heap))
			rec.set("small_groups_rows_per_s", smallGot[i].best.rowsPerSec())
			rec.set("ratio_vs_small_groups", g.best.rowsPerSec()/smallGot[i].best.rowsPerSec())
			// Issue 47: a row group of pyarrow's size is read at the
			// speed of the same rows in small ones, and a sequential
			// read fetches its bytes once.
			rec.target("ratio_vs_small_groups", ">=", 0.9)
			if i == 0 {
				rec.target("io_amplification", "<=", 1.05)
			}
		}
		switch i {
		case 2: // mix15: the targets
			rec.set("peak_heap_vs_shuffled", float64(g.heap)/float64(got[1].heap))
			rec.set("price_sweep", sweep)
			rec.target("mixing", "<=", 0.15)
			rec.target("peak_heap_vs_shuffled", "<=", 1.2)
			rec.target("ratio_vs_sequential", ">=", 0.3)
		case 3:
			rec.set("peak_heap_vs_shuffled", float64(g.heap)/float64(got[1].heap))
			rec.target("mixing", "<=", 0.05)
		}
		if err := e.emit(rec); err != nil {
			return err
		}
	}
	return e.mixSweep(ctx, prefix, dir, shape, got[1].est.RowBytes, &got[0], &got[1])
}

// mixSample is the runs of one line: the fastest, the least peak heap
// (the machine's neighbours only ever add to it), and the price the
// dataset put on the order.
type mixSample struct {
	best  measurement
	runs  int
	heap  int64
	heaps []float64
	est   stream.Estimate
}

func (s *mixSample) run(ctx context.Context, dir string, r mixRun, rows int64) error {
	runtime.GC()
	h := startHeapSampler(2 * time.Millisecond)
	m, err := measureStream(ctx, streamRun{urls: []string{dir}, opts: r.opts, mixing: true,
		opened: func(ds *stream.Dataset) { s.est = ds.Estimate() }})
	peak, _ := h.finish()
	if err == nil {
		err = expectRows(m, rows)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", r.name, err)
	}
	s.heaps = append(s.heaps, float64(peak))
	if s.runs == 0 || peak < s.heap {
		s.heap = peak
	}
	if s.runs == 0 || m.rowsPerSec() > s.best.rowsPerSec() {
		s.best = m
	}
	s.runs++
	return nil
}

// pricePoint is one setting of settingsFor's sweep and its price.
type pricePoint struct {
	Passes        int     `json:"passes"`
	RowGroups     int     `json:"row_groups"`
	ShuffleMemory int64   `json:"shuffle_memory"`
	WindowRows    int     `json:"window_rows"`
	Places        float64 `json:"places"`
	Mixing        float64 `json:"mixing_estimate"`
	PeakBytes     int64   `json:"window_peak_estimate"`
	DecodersPeak  int64   `json:"decoders_peak_estimate"`
}

// mixSetting is what a mix line sets: passes and a ShuffleMemory.
type mixSetting struct {
	passes int
	memory int64
	peak   int64 // the estimate's peak of the windows decoded at once, to choose by
}

// mostPasses bounds the passes settingsFor tries: every pass decodes its
// chunks whole, and past three the decode alone takes rows/s under 0.3 ×
// sequential, the target's bound (the sweep lines measure 4 and 8).
const mostPasses = 3

// settingsFor is, for each of mixTargets, the setting a user would pick
// from Dataset.Estimate (sluice inspect) before reading any data: of
// ShufflePasses 1 to mostPasses and ShuffleMemory in steps of about 1.5
// times whole decoded row groups, the one whose estimated memory (the
// windows decoded at once, Estimate.DecodersPeakBytes) is least among
// those priced at the target's mixing or less; the whole dataset in one
// pass where none is. It returns the prices it went through too.
func (e *env) settingsFor(ctx context.Context, dir string, shape tableShape) ([]mixSetting, []pricePoint, error) {
	price := func(o stream.Options) (stream.Estimate, error) {
		o.URLs, o.BatchSize, o.Shuffle, o.Seed = []string{dir}, 1024, true, 42
		ds, err := stream.Open(ctx, o)
		if err != nil {
			return stream.Estimate{}, err
		}
		defer ds.Close()
		return ds.Estimate(), nil
	}
	base, err := price(stream.Options{})
	if err != nil {
		return nil, nil, err
	}
	best := make([]mixSetting, len(mixTargets))
	var sweep []pricePoint
	groups := max(1, int(shape.rows()/int64(shape.RowGroupRows)))
	for passes := 1; passes <= mostPasses; passes++ {
		for k := 1; ; k = max(k+1, k*3/2) {
			k = min(k, groups)
			// A little over k row groups' bytes, so that the rows they
			// hold are never one short of k groups.
			mem := int64(math.Ceil(float64(k*shape.RowGroupRows)*base.RowBytes)) + 4096
			est, err := price(stream.Options{ShuffleMemory: mem, ShufflePasses: passes})
			if err != nil {
				return nil, nil, err
			}
			peak := est.DecodersPeakBytes
			sweep = append(sweep, pricePoint{passes, k, mem, est.WindowRows, round(est.MeanPlaces), round(est.Mixing), est.PeakBytes(true), peak})
			e.cfg.Log.Info("mixing price", "dir", dir, "passes", passes, "row_groups", k, "shuffle_memory", mem, "window_rows", est.WindowRows, "places", est.MeanPlaces, "mixing", est.Mixing, "decoders_peak", peak)
			for i, t := range mixTargets {
				fits := est.Mixing >= 0 && est.Mixing <= t.mixing
				whole := k == groups && passes == 1 && best[i].memory == 0
				if (fits && (best[i].memory == 0 || peak < best[i].peak)) || whole {
					best[i] = mixSetting{passes, mem, peak}
				}
			}
			if k == groups {
				break
			}
		}
	}
	return best, sweep, nil
}

func humanSize(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
}

func pyarrowDescription(s tableShape) string {
	return tableDescription(s) + ", pages of 1 MiB, no page index"
}
