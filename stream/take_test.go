package stream

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/sluicedata/sluice/internal/testkit/sample"
	"github.com/sluicedata/sluice/internal/testkit/synth"
	"github.com/sluicedata/sluice/split"
)

// row is one row of the synth schema, for comparing what two reads give.
type row struct {
	id, label int64
	x         float64
	s         string
	sNull     bool
}

func rowsOf(t testing.TB, b arrow.RecordBatch) []row {
	t.Helper()
	ids := b.Column(0).(*array.Int64)
	labels := b.Column(1).(*array.Int64)
	xs := b.Column(2).(*array.Float64)
	ss := b.Column(3).(*array.String)
	out := make([]row, b.NumRows())
	for i := range out {
		out[i] = row{id: ids.Value(i), label: labels.Value(i), x: xs.Value(i), s: ss.Value(i), sNull: ss.IsNull(i)}
	}
	return out
}

// delivered is every row Batches delivers in the dataset's current epoch,
// in order.
func delivered(t testing.TB, ds *Dataset) []row {
	t.Helper()
	var out []row
	for b, err := range ds.Batches(context.Background()) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, rowsOf(t, b)...)
	}
	return out
}

func take(t testing.TB, ds *Dataset, epoch int64, split int, pos []int64) []row {
	t.Helper()
	var b arrow.RecordBatch
	var err error
	if split < 0 {
		b, err = ds.Take(context.Background(), epoch, pos)
	} else {
		b, err = ds.TakeSplit(context.Background(), epoch, split, pos)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer b.Release()
	if !b.Schema().Equal(ds.Schema()) {
		t.Fatalf("take's schema %v, the dataset's %v", b.Schema(), ds.Schema())
	}
	return rowsOf(t, b)
}

// TestTakeMatchesBatches: the rows Take returns at any positions, in any
// order, are the rows Batches delivers there, over shuffled and unshuffled
// orders, several NumSplits and clump sizes, files with and without a page
// index; and TakeSplit's are those of the rank that owns the split alone.
func TestTakeMatchesBatches(t *testing.T) {
	plain := writeDataset(t, smallSpec)
	paged := writeDataset(t, synth.Spec{Files: 3, RowsPerFile: 7000, RowGroupRows: 3500, Seed: 3, PageIndex: true})
	cases := []struct {
		name      string
		dir       string
		shuffle   bool
		splits    int
		clump     int
		cacheSize int64
		every     bool // take every position, not 3,072 random ones
	}{
		{"unshuffled", plain, false, 1, 1, 0, false},
		{"unshuffled-splits3", plain, false, 3, 1, 0, false},
		{"shuffled", plain, true, 1, 1, 0, false},
		{"shuffled-splits3", plain, true, 3, 1, 0, false},
		{"shuffled-splits8-clump7", plain, true, 8, 7, 0, true},
		{"shuffled-splits5-nocache", plain, true, 5, 3, -1, false},
		{"paged-shuffled-splits4", paged, true, 4, 1, 0, true},
		{"paged-unshuffled-splits2-smallcache", paged, false, 2, 1, 64 << 10, false},
	}
	for _, c := range sample.Spread(cases, 3) {
		t.Run(c.name, func(t *testing.T) {
			o := checkedOptions(t, c.dir)
			o.Columns = nil
			o.Shuffle, o.NumSplits, o.ClumpSize, o.Limits.TakeCacheBytes = c.shuffle, c.splits, c.clump, c.cacheSize
			o.BatchSize = 97 // cuts windows and splits at odd places
			o.Epoch = 2
			ds := open(t, o)
			want := delivered(t, ds)
			n := int64(len(want))
			if got, err := ds.EpochRows(2); err != nil || got != n {
				t.Fatalf("EpochRows %d, %v; Batches delivered %d", got, err, n)
			}
			r := rand.New(rand.NewPCG(uint64(c.splits), 1))
			// Every position once, in a random order, in requests of up
			// to 1,024; then random positions with repeats.
			all := make([]int64, n)
			for i := range all {
				all[i] = int64(i)
			}
			r.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
			if !c.every {
				all = all[:3*1024]
			}
			for len(all) > 0 {
				k := min(len(all), 1+r.IntN(1024))
				got := take(t, ds, 2, -1, all[:k])
				for i, p := range all[:k] {
					if got[i] != want[p] {
						t.Fatalf("position %d: take %+v, Batches %+v", p, got[i], want[p])
					}
				}
				all = all[k:]
			}
			pos := make([]int64, 300)
			for i := range pos {
				pos[i] = r.Int64N(n)
			}
			got := take(t, ds, 2, -1, pos)
			for i, p := range pos {
				if got[i] != want[p] {
					t.Fatalf("position %d (repeat request): take %+v, Batches %+v", p, got[i], want[p])
				}
			}
			// One split alone: what its rank delivers at WorldSize = NumSplits.
			split := c.splits - 1
			so := o
			so.WorldSize, so.Rank = c.splits, split
			wantSplit := delivered(t, open(t, so))
			idx := make([]int64, len(wantSplit))
			for i := range idx {
				idx[i] = int64(len(idx) - 1 - i)
			}
			gotSplit := take(t, ds, 2, split, idx)
			for i, p := range idx {
				if gotSplit[i] != wantSplit[p] {
					t.Fatalf("split %d offset %d: take %+v, Batches %+v", split, p, gotSplit[i], wantSplit[p])
				}
			}
			if c.splits%2 != 0 {
				return
			}
			// One rank of two: its splits round-robin.
			ro := o
			ro.WorldSize, ro.Rank = 2, 1
			wantRank := delivered(t, open(t, ro))
			b, err := ds.TakeRank(context.Background(), 2, 1, 2, idx[:0:0])
			if err != nil {
				t.Fatal(err)
			}
			b.Release()
			rpos := make([]int64, len(wantRank))
			for i := range rpos {
				rpos[i] = int64(i)
			}
			r.Shuffle(len(rpos), func(i, j int) { rpos[i], rpos[j] = rpos[j], rpos[i] })
			b, err = ds.TakeRank(context.Background(), 2, 1, 2, rpos)
			if err != nil {
				t.Fatal(err)
			}
			gotRank := rowsOf(t, b)
			b.Release()
			for i, p := range rpos {
				if gotRank[i] != wantRank[p] {
					t.Fatalf("rank 1 of 2 position %d: take %+v, Batches %+v", p, gotRank[i], wantRank[p])
				}
			}
		})
	}
}

func TestTakeOutOfRange(t *testing.T) {
	o := checkedOptions(t, writeDataset(t, smallSpec))
	o.NumSplits = 4
	ds := open(t, o)
	n := smallSpec.Rows()
	for _, pos := range []int64{-1, n, n + 5} {
		_, err := ds.Take(context.Background(), 0, []int64{0, pos})
		if !errors.Is(err, split.ErrPosition) || !strings.Contains(err.Error(), fmt.Sprintf("[0, %d)", n)) {
			t.Errorf("position %d: error %v, want ErrPosition naming [0, %d)", pos, err, n)
		}
	}
	_, err := ds.TakeSplit(context.Background(), 0, 1, []int64{n / 4})
	if !errors.Is(err, split.ErrPosition) || !strings.Contains(err.Error(), fmt.Sprintf("split 1: permutation: position out of range: %d is not in [0, %d)", n/4, n/4)) {
		t.Errorf("split offset %d: error %v, want ErrPosition naming split 1's range", n/4, err)
	}
	if _, err := ds.TakeSplit(context.Background(), 0, 4, []int64{0}); !errors.Is(err, split.ErrPosition) {
		t.Errorf("split 4 of 4: error %v, want ErrPosition", err)
	}
	if _, err := ds.Take(context.Background(), -1, []int64{0}); err == nil {
		t.Error("epoch -1: no error")
	}
	b, err := ds.Take(context.Background(), 0, nil)
	if err != nil || b.NumRows() != 0 || !b.Schema().Equal(ds.Schema()) {
		t.Fatalf("no positions: %v rows, %v", b, err)
	}
	b.Release()
}

// TestTakeUnknownCounts: text-like files whose counts are unknown before
// reading are refused, saying what is needed.
func TestTakeUnknownCounts(t *testing.T) {
	dir, _ := writeIPC(t, [][]int{{100, 50}, {70}})
	ds := open(t, ipcOptions(t, dir, true))
	_, err := ds.Take(context.Background(), 0, []int64{0})
	if !errors.Is(err, split.ErrUnknownRows) || !strings.Contains(err.Error(), "counting pass") {
		t.Fatalf("error %v, want ErrUnknownRows saying a counting pass is needed", err)
	}
	if _, err := ds.TakeSplit(context.Background(), 0, 0, []int64{0}); !errors.Is(err, split.ErrUnknownRows) {
		t.Fatalf("TakeSplit: error %v, want ErrUnknownRows", err)
	}
}

// TestTakeReadsUnitsOnce: a request of 1,024 random positions fetches each
// byte at most once (each row group it needs once), and the same request
// again is served from the cache without a read.
func TestTakeReadsUnitsOnce(t *testing.T) {
	var log readLog
	o := checkedOptions(t, writeDataset(t, smallSpec))
	o.Storage.Wrap = log.wrap
	o.Shuffle, o.NumSplits = true, 3
	o.Columns = nil
	ds := open(t, o)
	r := rand.New(rand.NewPCG(5, 5))
	pos := make([]int64, 1024)
	for i := range pos {
		pos[i] = r.Int64N(smallSpec.Rows())
	}
	log.start()
	got := take(t, ds, 1, -1, pos)
	if len(got) != len(pos) {
		t.Fatalf("%d rows for %d positions", len(got), len(pos))
	}
	log.mu.Lock()
	reads := slices.Clone(log.reads)
	log.mu.Unlock()
	slices.SortFunc(reads, func(a, b rangeRead) int {
		if c := strings.Compare(a.key, b.key); c != 0 {
			return c
		}
		return int(a.off - b.off)
	})
	for i := 1; i < len(reads); i++ {
		if a, b := reads[i-1], reads[i]; a.key == b.key && a.off+a.n > b.off {
			t.Fatalf("%s: bytes [%d, %d) and [%d, %d) both read", a.key, a.off, a.off+a.n, b.off, b.off+b.n)
		}
	}
	if len(reads) == 0 {
		t.Fatal("no reads")
	}
	log.start()
	again := take(t, ds, 1, -1, pos)
	if !slices.Equal(got, again) {
		t.Fatal("the repeated request returned other rows")
	}
	if b := log.bytes(); b != 0 {
		t.Fatalf("the repeated request read %d bytes, want 0 (cached)", b)
	}
}

func TestLocate(t *testing.T) {
	o := checkedOptions(t, writeDataset(t, smallSpec))
	o.Shuffle, o.NumSplits, o.Columns = true, 2, nil
	ds := open(t, o)
	want := delivered(t, ds)
	pos := []int64{0, 10, 5000, int64(len(want) - 1)}
	locs, err := ds.Locate(0, pos)
	if err != nil {
		t.Fatal(err)
	}
	for i, l := range locs {
		// synth ids number the rows of the dataset in file order.
		id := int64(l.File)*int64(smallSpec.RowsPerFile) + l.Row
		if id != want[pos[i]].id {
			t.Errorf("position %d located at file %d row %d (id %d), Batches delivers id %d", pos[i], l.File, l.Row, id, want[pos[i]].id)
		}
		if l.Row != int64(l.Unit)*int64(smallSpec.RowGroupRows)+l.UnitRow || l.UnitRow >= int64(smallSpec.RowGroupRows) {
			t.Errorf("position %d: row %d is not unit %d row %d", pos[i], l.Row, l.Unit, l.UnitRow)
		}
		if !strings.HasSuffix(l.URL, synth.FileName(l.File)) {
			t.Errorf("position %d: URL %s for file %d", pos[i], l.URL, l.File)
		}
	}
}

// BenchmarkTake is requests of 1,024 random positions over a shuffled
// dataset of 64 row groups, the cache warm after the first.
func BenchmarkTake(b *testing.B) {
	spec := synth.Spec{Files: 8, RowsPerFile: 250_000, RowGroupRows: 32_768, Seed: 1}
	dir := writeDataset(b, spec)
	ds := open(b, Options{URLs: []string{dir}, Shuffle: true, Seed: 42})
	r := rand.New(rand.NewPCG(1, 1))
	pos := make([]int64, 1024)
	b.ResetTimer()
	for b.Loop() {
		for i := range pos {
			pos[i] = r.Int64N(spec.Rows())
		}
		out, err := ds.Take(context.Background(), 0, pos)
		if err != nil {
			b.Fatal(err)
		}
		out.Release()
	}
	b.ReportMetric(float64(b.N*len(pos))/b.Elapsed().Seconds(), "rows/s")
}
