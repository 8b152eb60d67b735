package main

import (
	"context"
	"fmt"
	"runtime"

	"github.com/sluicedata/sluice/internal/synth"
	"github.com/sluicedata/sluice/stream"
)

// The splits64 scenario: what split boundaries cost in bytes fetched. With
// 64 splits of a 2M-row dataset a split holds about 32k rows, so nearly
// every boundary falls inside a row group. Each side fetches only the pages
// its rows need: found by the file's page index where it has one, by a walk
// of the page headers where it has none and its footer counts several
// pages a chunk (stream.Overlap counts both as read by pages).

// splitsNum is the scenario's NumSplits: many splits per row group.
const splitsNum = 64

// splitsWorlds are the world sizes streamed. A world size only changes which
// rank reads which split, never what a split reads, so each is one epoch of
// the whole dataset, all ranks in turn.
var splitsWorlds = []int{1, 2, 4, 8}

// splitsData names the datasets of the scenario, in the order they run:
// pageindex and nopageindex are cfg.SplitsSpec (row groups of 262,500 rows,
// small pages) with and without the page index, benchdata the main
// dataset's rows and row groups (32,768 rows) written with a page index.
var splitsData = []string{"pageindex", "benchdata", "nopageindex"}

// splitsLines are the scenario's line names: splits64_<data>_w<world size>.
var splitsLines = func() []string {
	var names []string
	for _, d := range splitsData {
		for _, w := range splitsWorlds {
			names = append(names, splitsLine(d, w))
		}
	}
	return names
}()

func splitsLine(data string, world int) string {
	return fmt.Sprintf("splits%d_%s_w%d", splitsNum, data, world)
}

// splitsTarget is the target of io_amplification on every line: a cut row
// group costs each side its own pages, the page that holds the boundary,
// the dictionary and, without a page index, the page headers walked to find
// them.
const splitsTarget = 1.05

func (e *env) splits64(ctx context.Context) error {
	for _, name := range splitsData {
		// The bench data's rows and row groups, written with a page index
		// (small pages, dictionary on label only): as written for the
		// other scenarios, in arrow-go's default pages (one per chunk),
		// 64 splits cut nearly every row group and each side fetches its
		// one page per column whole (about 2.0).
		spec := e.cfg.Spec
		spec.PageIndex = true
		if name != "benchdata" {
			spec = e.cfg.SplitsSpec
			spec.PageIndex = name == "pageindex"
			spec.SmallPages = name == "nopageindex"
		}
		d, err := writeData(ctx, e.cfg, e.data.root, spec)
		if err != nil {
			return err
		}
		for _, world := range splitsWorlds {
			if err := e.splitsWorld(ctx, name, d, world); err != nil {
				return fmt.Errorf("%s: %w", splitsLine(name, world), err)
			}
		}
	}
	return nil
}

// splitsWorld streams one shuffled epoch of d on every rank of world, one
// rank after the other, checks that together they delivered every row once,
// and emits the line with the bytes of all ranks summed.
func (e *env) splitsWorld(ctx context.Context, name string, d *dataset, world int) error {
	var total measurement
	var ov stream.Overlap
	reads := newReadLog() // shared: reread_bytes counts ranges two ranks both fetched
	for rank := range world {
		o := e.opts()
		// Shuffled is the harder case: a split's pieces come in chunk
		// order, so the rows on each side of a boundary are fetched at
		// different times and no fetch can serve both.
		o.Shuffle, o.Seed = true, 42
		o.Rank, o.WorldSize, o.NumSplits = rank, world, splitsNum
		runtime.GC()
		m, err := measureStream(ctx, streamRun{
			urls: []string{d.dir}, opts: o, sumIDs: true, reads: reads,
			opened: func(ds *stream.Dataset) {
				if rank == 0 {
					ov = ds.Overlap() // every rank plans the same epoch
				}
			},
		})
		if err != nil {
			return fmt.Errorf("rank %d: %w", rank, err)
		}
		total = total.add(m)
		total.storedBytes = m.storedBytes // every rank plans the same files
		total.snap = m.snap
	}
	n := d.spec.Rows()
	if err := expectRows(total, n); err != nil {
		return err
	}
	if want := n * (n - 1) / 2; total.idSum != want {
		return fmt.Errorf("ids of all ranks sum to %d, want %d: a row came twice or never", total.idSum, want)
	}
	r := e.result(splitsLine(name, world), e.single(total))
	r.set("options", fmt.Sprintf("Shuffle, Seed 42, NumSplits %d, WorldSize %d; every rank in turn, figures summed (stage seconds are the last rank's)", splitsNum, world))
	r.set("world_size", world).set("num_splits", splitsNum)
	r.set("data", splitsDescription(name, d.spec))
	r.set("row_group_rows", d.spec.RowGroupRows)
	r.set("page_index", d.spec.PageIndex)
	r.set("cut_units", ov.CutUnits).set("paged_units", ov.PagedUnits)
	r.set("refetch_bytes", ov.Bytes)
	// What Overlap predicts: the stored bytes, those fetched again, and
	// the footers every rank reads.
	r.set("overlap_io_amplification", float64(total.storedBytes+ov.Bytes+total.planBytes)/float64(total.storedBytes))
	r.target("io_amplification", "<=", splitsTarget)
	return e.emit(r)
}

func splitsDescription(name string, s synth.Spec) string {
	desc := fmt.Sprintf("%d files of %d rows, row groups of %d rows", s.Files, s.RowsPerFile, s.RowGroupRows)
	switch name {
	case "pageindex":
		return desc + ", page index, pages of 8 KiB or 1024 rows (the larger), dictionary on label only"
	case "nopageindex":
		return desc + ", no page index, pages of 8 KiB or 1024 rows (the larger), dictionary on label only"
	}
	return desc + ", the bench data's rows and row groups with a page index, pages of 8 KiB or 1024 rows (the larger), dictionary on label only"
}
