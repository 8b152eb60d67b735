package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"sync"

	"github.com/apache/arrow-go/v18/parquet/file"
	"gocloud.dev/blob/fileblob"

	"github.com/sluicedata/sluice/internal/testkit/synth"
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
// and emits the line with the bytes of all ranks summed. The ranks share
// their plan through a PlanStore (a local bucket), as a job does that
// wants every byte fetched once: rank 0 reads the footers and walks the
// page headers of the row groups split boundaries cut, the others read
// the plan object, whose bytes count as read.
func (e *env) splitsWorld(ctx context.Context, name string, d *dataset, world int) (err error) {
	planDir, err := os.MkdirTemp("", "sluice-bench-splits-plan-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(planDir)
	planBucket, err := fileblob.OpenBucket(planDir, nil)
	if err != nil {
		return err
	}
	defer planBucket.Close()
	const planKey = "plan.json"
	var total measurement
	var ov stream.Overlap
	var cut map[string]map[int]bool
	var mu sync.Mutex
	var requests []readAt // every rank's, planning's included
	reads := newReadLog() // shared: reread_bytes counts ranges two ranks both fetched
	for rank := range world {
		o := e.opts()
		// Shuffled is the harder case: a split's pieces come in chunk
		// order, so the rows on each side of a boundary are fetched at
		// different times and no fetch can serve both.
		o.Shuffle, o.Seed = true, 42
		o.Rank, o.WorldSize, o.NumSplits = rank, world, splitsNum
		o.PlanStore = &stream.PlanStore{Bucket: planBucket, Key: planKey}
		runtime.GC()
		m, err := measureStream(ctx, streamRun{
			urls: []string{d.dir}, opts: o, sumIDs: true, reads: reads,
			opened: func(ds *stream.Dataset) {
				if rank == 0 {
					ov = ds.Overlap() // every rank plans the same epoch
					cut = cutRowGroups(ds)
				}
			},
			onRead: func(key string, off int64, n int) {
				mu.Lock()
				defer mu.Unlock()
				requests = append(requests, readAt{filepath.Base(key), off})
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
	attrs, err := planBucket.Attributes(ctx, planKey)
	if err != nil {
		return fmt.Errorf("the shared plan: %w", err)
	}
	// Rank 0 wrote the plan object; every other rank read it once.
	planStoreBytes := attrs.Size * int64(world-1)
	total.readBytes += planStoreBytes
	byGroup, err := requestsByRowGroup(d.files, requests)
	if err != nil {
		return err
	}
	r := e.result(splitsLine(name, world), e.single(total))
	r.set("options", fmt.Sprintf("Shuffle, Seed 42, NumSplits %d, WorldSize %d, a PlanStore; every rank in turn, figures summed (stage seconds are the last rank's)", splitsNum, world))
	r.set("world_size", world).set("num_splits", splitsNum)
	r.set("data", splitsDescription(name, d.spec))
	r.set("row_group_rows", d.spec.RowGroupRows)
	r.set("page_index", d.spec.PageIndex)
	r.set("cut_units", ov.CutUnits).set("paged_units", ov.PagedUnits)
	r.set("refetch_bytes", ov.Bytes)
	r.set("plan_store_bytes", planStoreBytes)
	var cutReq, otherReq, cutGroups, otherGroups int64
	for file, groups := range byGroup {
		for rg, k := range groups {
			if cut[file][rg] {
				cutReq, cutGroups = cutReq+k, cutGroups+1
			} else {
				otherReq, otherGroups = otherReq+k, otherGroups+1
			}
		}
	}
	if cutGroups > 0 {
		r.set("requests_per_boundary_row_group", float64(cutReq)/float64(cutGroups))
	}
	if otherGroups > 0 {
		r.set("requests_per_other_row_group", float64(otherReq)/float64(otherGroups))
	}
	// What Overlap predicts: the stored bytes, those fetched again, and
	// the footers every rank reads.
	r.set("overlap_io_amplification", float64(total.storedBytes+ov.Bytes+total.planBytes)/float64(total.storedBytes))
	r.target("io_amplification", "<=", splitsTarget)
	return e.emit(r)
}

// readAt is a range read: the file's base name and the offset.
type readAt struct {
	file string
	off  int64
}

// cutRowGroups are the row groups of ds that a piece of the current
// epoch's splits reads part of, by file base name.
func cutRowGroups(ds *stream.Dataset) map[string]map[int]bool {
	cut := map[string]map[int]bool{}
	files := ds.Files()
	for _, sp := range ds.Splits() {
		for _, p := range sp.Pieces {
			if p.Start < 0 {
				continue
			}
			f := files[p.Fragment]
			var at int64
			for u, un := range f.Units {
				lo, hi := at, at+un.Rows
				at = hi
				if hi > p.Start && lo < p.End && (p.Start > lo || p.End < hi) {
					name := filepath.Base(f.URL)
					if cut[name] == nil {
						cut[name] = map[int]bool{}
					}
					cut[name][u] = true
				}
			}
		}
	}
	return cut
}

// requestsByRowGroup counts the reads that start inside each row group's
// column chunks (page headers walked, pages, page indexes between them
// count to the row group they start in), by file base name and row group.
// Footer reads start past every row group and count to none.
func requestsByRowGroup(paths []string, reads []readAt) (map[string]map[int]int64, error) {
	type span struct{ lo, hi int64 }
	spans := map[string][]span{}
	for _, p := range paths {
		pf, err := file.OpenParquetFile(p, false)
		if err != nil {
			return nil, err
		}
		md := pf.MetaData()
		for i := range md.NumRowGroups() {
			rg := md.RowGroup(i)
			sp := span{math.MaxInt64, 0}
			for c := range rg.NumColumns() {
				cc, err := rg.ColumnChunk(c)
				if err != nil {
					pf.Close()
					return nil, err
				}
				lo := cc.DataPageOffset()
				if cc.HasDictionaryPage() && cc.DictionaryPageOffset() > 0 {
					lo = min(lo, cc.DictionaryPageOffset())
				}
				sp.lo, sp.hi = min(sp.lo, lo), max(sp.hi, lo+cc.TotalCompressedSize())
			}
			spans[filepath.Base(p)] = append(spans[filepath.Base(p)], sp)
		}
		pf.Close()
	}
	out := map[string]map[int]int64{}
	for _, r := range reads {
		for i, sp := range spans[r.file] {
			if r.off >= sp.lo && r.off < sp.hi {
				if out[r.file] == nil {
					out[r.file] = map[int]int64{}
				}
				out[r.file][i]++
				break
			}
		}
	}
	return out, nil
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
