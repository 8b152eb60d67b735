package stream

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/sluicedata/sluice/formats"
	"github.com/sluicedata/sluice/formats/parquet"
	"github.com/sluicedata/sluice/internal/testkit/arrowfile"
	"github.com/sluicedata/sluice/internal/testkit/sample"
	"github.com/sluicedata/sluice/internal/testkit/synth"
	vc "github.com/sluicedata/sluice/internal/testkit/valuecheck"
	"github.com/sluicedata/sluice/split"
)

// These tests stream Arrow IPC files through internal/testkit/arrowfile, a driver
// that can hide its row counts as CSV and JSON drivers will: the stream's
// guarantees must hold where the plan learns a window's rows only once it
// is read, and also with known counts through a driver that is not Parquet.

// ipcLayout is the record batches of each file, by rows: batches of very
// different sizes, empty ones, a file with no batch and one with only
// empty batches, so that some windows, pieces and whole splits turn out
// empty when read.
func ipcLayout() [][]int {
	r := rand.New(rand.NewPCG(11, 12))
	sizes := []int{0, 0, 1, 3, 40, 97, 250, 600}
	files := [][]int{{}, {0, 0, 0}}
	for range 7 {
		var batches []int
		for range 1 + r.IntN(9) {
			batches = append(batches, sizes[r.IntN(len(sizes))])
		}
		files = append(files, batches)
	}
	return files
}

// writeIPC writes the layout's files of the value harness's data
// (internal/testkit/valuecheck: id, i32 and text), ids numbering all rows in
// order, and returns the directory and the row count.
func writeIPC(t testing.TB, files [][]int) (string, int64) {
	t.Helper()
	dir := t.TempDir()
	var id int64
	for i, batches := range files {
		sizes := make([]int64, len(batches))
		for j, n := range batches {
			sizes[j] = int64(n)
		}
		if err := vc.WriteArrowBatches(filepath.Join(dir, fmt.Sprintf("part-%02d.arrow", i)), vc.Pick(ipcColumns...), id, sizes); err != nil {
			t.Fatal(err)
		}
		for _, n := range batches {
			id += int64(n)
		}
	}
	return dir, id
}

var ipcColumns = []string{"id", "i32", "text"}

// ipcOptions streams dir through the IPC driver with a checked allocator.
// Chunks are small (a few units each) so that splits and shuffles have
// many to deal with.
func ipcOptions(t testing.TB, dir string, hide bool) Options {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	t.Cleanup(func() { mem.AssertSize(t, 0) })
	return Options{
		URLs:          []string{dir},
		Formats:       []formats.Format{arrowfile.Format{HideCounts: hide}},
		Columns:       ipcColumns,
		BatchSize:     64,
		ShuffleWindow: 500,
		ChunkBytes:    4 << 10,
		Seed:          42,
		Allocator:     mem,
	}
}

// fullBatches checks that every batch of a split holds BatchSize rows but
// its last: the cutter learns unknown windows' rows as they are read and
// fills batches across windows, empty ones included.
func fullBatches(t testing.TB, bs []taken, batchSize int) {
	t.Helper()
	last := map[int]int{}
	for i, b := range bs {
		last[b.split] = i
	}
	for i, b := range bs {
		if len(b.ids) == 0 || len(b.ids) > batchSize || (len(b.ids) < batchSize && last[b.split] != i) {
			t.Fatalf("batch %d of split %d has %d rows (batch size %d, the split's last is batch %d)", i, b.split, len(b.ids), batchSize, last[b.split])
		}
	}
}

// Every row comes exactly once across ranks, every split emits the same
// rows in the same order at every world size, and batches are full, with
// counts unknown and known.
func TestIPCExactlyOnceAndElastic(t *testing.T) {
	files := ipcLayout()
	dir, total := writeIPC(t, files)
	for _, hide := range []bool{true, false} {
		for _, shuffle := range []bool{false, true} {
			for _, splits := range sample.Spread([]int{4, 12}, 1) {
				t.Run(fmt.Sprintf("hide=%t/shuffle=%t/splits=%d", hide, shuffle, splits), func(t *testing.T) {
					reference := vc.Elastic(t, splits, vc.Divisors(splits, 4), vc.IDs(total), func(world, rank int) map[int][]int64 {
						o := ipcOptions(t, dir, hide)
						o.Shuffle, o.NumSplits, o.WorldSize, o.Rank = shuffle, splits, world, rank
						ds := open(t, o)
						if rank == 0 && world == 1 {
							checkSplitRows(t, ds, hide)
						}
						bs, _ := consume(t, ds, -1)
						fullBatches(t, bs, o.BatchSize)
						return bySplit(bs, nil)
					})
					var all []int64
					for s := range splits {
						all = append(all, reference[s]...)
					}
					if sorted := slices.IsSorted(all); sorted == shuffle {
						t.Fatalf("shuffle=%t but the splits in order are sorted=%t", shuffle, sorted)
					}
				})
			}
		}
	}
}

// checkSplitRows checks what the plan says of split sizes: unknown where
// counts are (0 for a split dealt no chunk), balanced to a row where they
// are known.
func checkSplitRows(t testing.TB, ds *Dataset, hide bool) {
	t.Helper()
	var lo, hi int64 = 1 << 62, -1 << 62
	for s, sp := range ds.Splits() {
		lo, hi = min(lo, sp.Rows), max(hi, sp.Rows)
		if want := int64(-1); hide && len(sp.Pieces) == 0 {
			want = 0
		} else if hide && sp.Rows != want {
			t.Fatalf("split %d of %d pieces has %d rows with unknown counts, want -1", s, len(sp.Pieces), sp.Rows)
		}
	}
	if !hide && (lo < 0 || hi-lo > 1) {
		t.Fatalf("split rows from %d to %d with known counts, want within one", lo, hi)
	}
}

// A state taken after any batch resumes exactly in a new dataset, and a
// loop that breaks goes on where it stopped in the same one, with windows
// whose rows the plan does not know and some that turn out empty.
func TestIPCResumeAnywhere(t *testing.T) {
	dir, total := writeIPC(t, ipcLayout())
	r := rand.New(rand.NewPCG(13, 14))
	for _, hide := range []bool{true, false} {
		for _, shuffle := range []bool{false, true} {
			for _, world := range []int{1, 4} {
				rank := r.IntN(world)
				o := ipcOptions(t, dir, hide)
				o.Shuffle, o.NumSplits, o.WorldSize, o.Rank = shuffle, 4, world, rank
				o.ClumpSize = 1 + r.IntN(8)
				name := fmt.Sprintf("hide=%t shuffle=%t world=%d rank=%d", hide, shuffle, world, rank)
				full, _ := consume(t, open(t, o), -1)
				if world == 1 {
					exactlyOnce(t, allIDs(full), total)
				}
				same := func(got []taken, what string) {
					t.Helper()
					if len(got) != len(full) {
						t.Fatalf("%s %s: %d batches, want %d", name, what, len(got), len(full))
					}
					for i := range got {
						if got[i].split != full[i].split || !slices.Equal(got[i].ids, full[i].ids) {
							t.Fatalf("%s %s: batch %d differs", name, what, i)
						}
					}
				}
				for range sample.Count(8, 2) {
					k := r.IntN(len(full) + 1)
					head, st := consume(t, open(t, o), k)
					second := open(t, o)
					if err := second.LoadStateDict(st); err != nil {
						t.Fatal(err)
					}
					tail, _ := consume(t, second, -1)
					same(append(head, tail...), fmt.Sprintf("resume at %d", k))
				}
				// Several breaks in one dataset: kept windows carry over.
				ds := open(t, o)
				var got []taken
				for len(got) < len(full) {
					bs, _ := consume(t, ds, 1+r.IntN(5))
					if len(bs) == 0 {
						t.Fatalf("%s: an iteration delivered nothing after %d of %d batches", name, len(got), len(full))
					}
					got = append(got, bs...)
				}
				same(got, "with breaks")
			}
		}
	}
}

// States of all ranks merged resume at another world size: nothing lost,
// nothing repeated, each split's sequence the uninterrupted one.
func TestIPCElasticResume(t *testing.T) {
	dir, total := writeIPC(t, ipcLayout())
	for _, hide := range []bool{true, false} {
		for _, shuffle := range []bool{false, true} {
			t.Run(fmt.Sprintf("hide=%t/shuffle=%t", hide, shuffle), func(t *testing.T) {
				base := ipcOptions(t, dir, hide)
				base.Shuffle, base.NumSplits = shuffle, 4
				all := resumeAcross(t, base, []int{4, 2, 1}, 6, rand.New(rand.NewPCG(15, 16)))
				exactlyOnce(t, all, total)
			})
		}
	}
}

// DropRemainder needs exact counts: refused up front where they are
// unknown, honoured where the driver knows them.
func TestIPCDropRemainder(t *testing.T) {
	dir, total := writeIPC(t, ipcLayout())
	o := ipcOptions(t, dir, true)
	o.DropRemainder, o.NumSplits, o.WorldSize = true, 4, 4
	ds, err := Open(context.Background(), o)
	if err == nil {
		ds.Close()
		t.Fatal("DropRemainder was accepted with unknown row counts")
	}
	if !errors.Is(err, split.ErrUnknownRows) || !strings.Contains(err.Error(), "DropRemainder") {
		t.Fatalf("got %v, want ErrUnknownRows naming DropRemainder", err)
	}

	var counts []int
	var ids []int64
	for rank := range 4 {
		o := ipcOptions(t, dir, false)
		o.Shuffle, o.DropRemainder, o.NumSplits, o.WorldSize, o.Rank = true, true, 4, 4, rank
		bs, _ := consume(t, open(t, o), -1)
		counts = append(counts, len(bs))
		ids = append(ids, allIDs(bs)...)
	}
	if slices.Min(counts) != slices.Max(counts) {
		t.Fatalf("batches per rank differ with DropRemainder: %v", counts)
	}
	if dropped := total - int64(len(ids)); dropped < 0 || dropped >= 4 {
		t.Fatalf("DropRemainder dropped %d rows, want fewer than 4", dropped)
	}
	slices.Sort(ids)
	if len(slices.Compact(ids)) != len(ids) {
		t.Fatal("a row came twice")
	}
}

// Concurrency, prefetch depths, byte bounds, read batch and batch sizes
// change timing and cutting, never which rows a split emits or in which
// order, where the plan learns windows' rows only as they are read: the
// read stages order windows by an estimate and the cutter by the real rows.
func TestIPCOrderIndependentOfConcurrency(t *testing.T) {
	dir, total := writeIPC(t, ipcLayout())
	for _, shuffle := range []bool{false, true} {
		var want map[int][]int64
		var wantBatches []taken
		for i, c := range []struct{ read, fetch, transform, prefetch, windows, readBatch, batch int }{
			{1, 1, 1, 1, 1, 5, 64}, {4, 16, 3, 16, 8, 1000, 64}, {2, 1, 1, 2, 1, 7, 64}, {8, 2, 8, 64, 2, 0, 64},
			{1, 1, 1, 1, 1, 0, 1}, {3, 5, 2, 3, 4, 33, 7}, {2, 8, 2, 4, 3, 0, 5000},
		} {
			o := ipcOptions(t, dir, true)
			o.Shuffle, o.NumSplits, o.WorldSize, o.Rank = shuffle, 4, 2, 1
			o.Limits.ReadConcurrency, o.Limits.FetchConcurrency, o.Limits.TransformConcurrency = c.read, c.fetch, c.transform
			o.Limits.PrefetchBatches, o.Limits.PrefetchWindows, o.Limits.ReadBatchSize, o.BatchSize = c.prefetch, c.windows, c.readBatch, c.batch
			if i%2 == 1 {
				o.Limits.PrefetchBytes = 1 // always only the next window in order
			}
			bs, _ := consume(t, open(t, o), -1)
			fullBatches(t, bs, c.batch)
			got := bySplit(bs, nil)
			if i == 0 {
				want, wantBatches = got, bs
				var ids []int64
				// Rank 0's splits, for exactly once.
				o.Rank = 0
				ids = append(allIDs(bs), allIDs(first(consume(t, open(t, o), -1)))...)
				exactlyOnce(t, ids, total)
				continue
			}
			for _, s := range []int{1, 3} {
				if !slices.Equal(got[s], want[s]) {
					t.Fatalf("shuffle=%t %+v: split %d differs", shuffle, c, s)
				}
			}
			if c.batch == 64 {
				// The same batch size: the same batches, in the same order.
				if len(bs) != len(wantBatches) {
					t.Fatalf("shuffle=%t %+v: %d batches, want %d", shuffle, c, len(bs), len(wantBatches))
				}
				for k := range bs {
					if bs[k].split != wantBatches[k].split || !slices.Equal(bs[k].ids, wantBatches[k].ids) {
						t.Fatalf("shuffle=%t %+v: batch %d differs", shuffle, c, k)
					}
				}
			}
		}
	}
}

// A dataset of Parquet files (known counts) and IPC files whose counts are
// unknown is dealt by bytes as a whole: rows still come exactly once, each
// split's sequence is the same at every world size, and states resume.
func TestIPCMixedWithParquet(t *testing.T) {
	spec := synth.Spec{Files: 3, RowsPerFile: 700, RowGroupRows: 90, Seed: 3}
	dir := writeDataset(t, spec)
	var id int64 = spec.Rows()
	for i, batches := range ipcLayout()[:5] {
		if err := arrowfile.WriteFile(filepath.Join(dir, fmt.Sprintf("ipc-%02d.arrow", i)), id, batches); err != nil {
			t.Fatal(err)
		}
		for _, n := range batches {
			id += int64(n)
		}
	}
	total := id
	r := rand.New(rand.NewPCG(17, 18))
	for _, shuffle := range []bool{false, true} {
		options := func() Options {
			o := ipcOptions(t, dir, true)
			o.Formats = []formats.Format{parquet.Format{}, arrowfile.Format{HideCounts: true}}
			o.Columns = []string{"id", "label"} // the synthetic Parquet files' columns
			o.Shuffle, o.NumSplits = shuffle, 4
			return o
		}
		vc.Elastic(t, 4, []int{1, 2, 4}, vc.IDs(total), func(world, rank int) map[int][]int64 {
			o := options()
			o.WorldSize, o.Rank = world, rank
			bs, _ := consume(t, open(t, o), -1)
			fullBatches(t, bs, o.BatchSize)
			return bySplit(bs, nil)
		})
		o := options()
		full := allIDs(first(consume(t, open(t, o), -1)))
		for range 4 {
			k := r.IntN(len(full)/o.BatchSize + 1)
			head, st := consume(t, open(t, o), k)
			ds := open(t, o)
			if err := ds.LoadStateDict(st); err != nil {
				t.Fatal(err)
			}
			if got := append(allIDs(head), allIDs(first(consume(t, ds, -1)))...); !slices.Equal(got, full) {
				t.Fatalf("shuffle=%t: resume at batch %d changed the rows", shuffle, k)
			}
		}
	}
}

// peakAllocator records the most bytes allocated at once.
type peakAllocator struct {
	memory.Allocator
	mu        sync.Mutex
	now, peak int64
}

func (a *peakAllocator) add(n int64) {
	a.mu.Lock()
	a.now += n
	a.peak = max(a.peak, a.now)
	a.mu.Unlock()
}

func (a *peakAllocator) Allocate(n int) []byte {
	a.add(int64(n))
	return a.Allocator.Allocate(n)
}

func (a *peakAllocator) Reallocate(n int, b []byte) []byte {
	a.add(int64(n - len(b)))
	return a.Allocator.Reallocate(n, b)
}

func (a *peakAllocator) Free(b []byte) {
	a.add(-int64(len(b)))
	a.Allocator.Free(b)
}

// Where counts are unknown, reads are ordered by each split's rows per
// byte as learned, so that a split of many one-row windows beside a split
// of a few large ones does not make the cutter pull and hold the large ones
// long before they are needed: streaming the two together holds about what
// streaming each alone does (ordered as if every window held a batch, it
// held four times as much). The peaks move with timing: together over the
// larger alone ran 1.4 to 2.2 in 20 runs, and failed a CI run at 2.2
// against a bound of 2.
func TestIPCUnknownCountsStayBounded(t *testing.T) {
	many := make([]int, sample.Count(3000, 1000))
	for i := range many {
		many[i] = 1
	}
	few := make([]int, 15)
	for i := range few {
		few[i] = 200
	}
	peak := func(layout [][]int) int64 {
		dir, rows := writeIPC(t, layout)
		o := ipcOptions(t, dir, true)
		mem := &peakAllocator{Allocator: o.Allocator}
		o.Allocator = mem
		o.NumSplits, o.ChunkBytes, o.Limits.PrefetchWindows, o.Limits.FetchConcurrency = len(layout), 1, 1, 2
		ds := open(t, o)
		if n := len(ds.Splits()[0].Pieces); len(layout) == 2 && n < 100 {
			t.Fatalf("split 0 has %d pieces: the layout did not deal the one-row batches to one split", n)
		}
		bs, _ := consume(t, ds, -1)
		exactlyOnce(t, allIDs(bs), rows)
		return mem.peak
	}
	alone := max(peak([][]int{many}), peak([][]int{few}))
	together := peak([][]int{many, few})
	t.Logf("peak Arrow memory: %d bytes streaming the two files together, %d the larger of each alone", together, alone)
	if together > 3*alone {
		t.Errorf("together the stream held %d bytes at once, more than three times the %d of either alone", together, alone)
	}
}
