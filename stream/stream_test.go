package stream

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/sluicedata/sluice/checkpoint"
	"github.com/sluicedata/sluice/formats"
	"github.com/sluicedata/sluice/internal/testkit/synth"
	vc "github.com/sluicedata/sluice/internal/testkit/valuecheck"
)

// Every row comes exactly once per epoch across all ranks, and every split
// emits the same sequence whatever the world size.
func TestExactlyOnceAndElasticDeterminism(t *testing.T) {
	dir := writeDataset(t, smallSpec)
	for _, shuffle := range []bool{false, true} {
		t.Run(fmt.Sprintf("shuffle=%t", shuffle), func(t *testing.T) {
			reference := vc.Elastic(t, 8, []int{1, 2, 4, 8}, vc.IDs(smallSpec.Rows()), func(world, rank int) map[int][]int64 {
				o := checkedOptions(t, dir)
				o.Shuffle, o.NumSplits, o.WorldSize, o.Rank = shuffle, 8, world, rank
				return bySplit(first(consume(t, open(t, o), -1)), nil)
			})
			if shuffle && slices.IsSorted(reference[0]) {
				t.Fatal("shuffled split 0 came in storage order")
			}
			if !shuffle && !slices.IsSorted(reference[0]) {
				t.Fatal("unshuffled split 0 is not in storage order")
			}
		})
	}
}

// Concurrency, prefetch depth and read batch size change timing, never order.
func TestOrderIndependentOfConcurrency(t *testing.T) {
	dir := writeDataset(t, smallSpec)
	var want []taken
	for i, c := range []struct{ read, transform, prefetch, readBatch int }{
		{1, 1, 1, 64}, {4, 3, 16, 1000}, {2, 1, 2, 0}, {8, 8, 64, 7},
	} {
		o := checkedOptions(t, dir)
		o.Shuffle, o.NumSplits, o.WorldSize, o.Rank = true, 8, 2, 1
		o.Limits.ReadConcurrency, o.Limits.TransformConcurrency, o.Limits.PrefetchBatches, o.Limits.ReadBatchSize = c.read, c.transform, c.prefetch, c.readBatch
		got, _ := consume(t, open(t, o), -1)
		if i == 0 {
			want = got
			continue
		}
		if len(got) != len(want) {
			t.Fatalf("%+v: %d batches, want %d", c, len(got), len(want))
		}
		for k := range got {
			if got[k].split != want[k].split || !slices.Equal(got[k].ids, want[k].ids) {
				t.Fatalf("%+v: batch %d differs", c, k)
			}
		}
	}
}

// Another epoch, another order; the same epoch, the same order.
func TestEpochs(t *testing.T) {
	dir := writeDataset(t, smallSpec)
	o := checkedOptions(t, dir)
	o.Shuffle = true
	ds := open(t, o)
	e0, _ := consume(t, ds, -1)
	if ds.Epoch() != 1 {
		t.Fatalf("after a full pass the epoch is %d, want 1", ds.Epoch())
	}
	e1, _ := consume(t, ds, -1)
	exactlyOnce(t, allIDs(e0), smallSpec.Rows())
	exactlyOnce(t, allIDs(e1), smallSpec.Rows())
	if slices.Equal(allIDs(e0), allIDs(e1)) {
		t.Fatal("epochs 0 and 1 have the same order")
	}
	again := open(t, o)
	if err := again.SetEpoch(1); err != nil {
		t.Fatal(err)
	}
	e1b, _ := consume(t, again, -1)
	if !slices.Equal(allIDs(e1), allIDs(e1b)) {
		t.Fatal("epoch 1 differs between two datasets")
	}
}

// A state taken at a random batch resumes exactly: property test over many
// positions, shuffled and not, on several ranks.
func TestResumeAnywhere(t *testing.T) {
	dir := writeDataset(t, smallSpec)
	r := rand.New(rand.NewPCG(1, 2))
	for _, shuffle := range []bool{false, true} {
		for _, world := range []int{1, 4} {
			rank := r.IntN(world)
			o := checkedOptions(t, dir)
			o.Shuffle, o.NumSplits, o.WorldSize, o.Rank = shuffle, 8, world, rank
			o.ClumpSize = 1 + r.IntN(20)
			full, _ := consume(t, open(t, o), -1)
			for range 12 {
				k := r.IntN(len(full) + 1)
				first := open(t, o)
				head, st := consume(t, first, k)
				second := open(t, o)
				if err := second.LoadStateDict(st); err != nil {
					t.Fatal(err)
				}
				tail, _ := consume(t, second, -1)
				got := append(head, tail...)
				if len(got) != len(full) {
					t.Fatalf("shuffle=%t world=%d rank=%d resume at %d: %d batches, want %d", shuffle, world, rank, k, len(got), len(full))
				}
				for i := range got {
					if got[i].split != full[i].split || !slices.Equal(got[i].ids, full[i].ids) {
						t.Fatalf("shuffle=%t world=%d rank=%d resume at %d: batch %d differs", shuffle, world, rank, k, i)
					}
				}
			}
		}
	}
}

// A resumed stream may use another batch size: cursors count rows.
func TestResumeWithAnotherBatchSize(t *testing.T) {
	dir := writeDataset(t, smallSpec)
	o := checkedOptions(t, dir)
	o.Shuffle = true
	full := allIDs(first(consume(t, open(t, o), -1)))
	head, st := consume(t, open(t, o), 37)
	o.BatchSize = 333
	ds := open(t, o)
	if err := ds.LoadStateDict(st); err != nil {
		t.Fatal(err)
	}
	tail, _ := consume(t, ds, -1)
	if !slices.Equal(append(allIDs(head), allIDs(tail)...), full) {
		t.Fatal("resume with another batch size changed the rows")
	}
}

func first[A, B any](a A, _ B) A { return a }

// A job saved at world size 8 resumes at 4, then at 2: nothing lost,
// nothing repeated, and every split's sequence is the uninterrupted one.
func TestElasticResume(t *testing.T) {
	dir := writeDataset(t, smallSpec)
	for _, shuffle := range []bool{false, true} {
		t.Run(fmt.Sprintf("shuffle=%t", shuffle), func(t *testing.T) {
			base := checkedOptions(t, dir)
			base.Shuffle, base.NumSplits = shuffle, 8
			all := resumeAcross(t, base, []int{8, 4, 2}, 12, rand.New(rand.NewPCG(3, 4)))
			exactlyOnce(t, all, smallSpec.Rows())
		})
	}
}

// DropRemainder gives every rank the same number of batches and drops fewer
// than NumSplits rows; without it split row counts differ by at most one.
func TestDropRemainder(t *testing.T) {
	spec := synth.Spec{Files: 3, RowsPerFile: 1001, RowGroupRows: 100}
	dir := writeDataset(t, spec)
	for _, drop := range []bool{false, true} {
		var counts []int
		var ids []int64
		for rank := range 4 {
			o := checkedOptions(t, dir)
			o.Shuffle, o.NumSplits, o.WorldSize, o.Rank, o.DropRemainder = true, 8, 4, rank, drop
			o.BatchSize = 64
			ds := open(t, o)
			if rank == 0 {
				var lo, hi int64 = 1 << 62, 0
				for _, sp := range ds.Splits() {
					lo, hi = min(lo, sp.Rows), max(hi, sp.Rows)
				}
				if drop && lo != hi || hi-lo > 1 {
					t.Fatalf("drop=%t: split rows from %d to %d", drop, lo, hi)
				}
			}
			bs, _ := consume(t, ds, -1)
			counts = append(counts, len(bs))
			ids = append(ids, allIDs(bs)...)
		}
		if !drop {
			exactlyOnce(t, ids, spec.Rows())
			continue
		}
		if slices.Min(counts) != slices.Max(counts) {
			t.Fatalf("batches per rank differ with DropRemainder: %v", counts)
		}
		dropped := spec.Rows() - int64(len(ids))
		if dropped < 0 || dropped >= 8 {
			t.Fatalf("DropRemainder dropped %d rows, want fewer than 8", dropped)
		}
		slices.Sort(ids)
		if len(slices.Compact(ids)) != len(ids) {
			t.Fatal("a row came twice")
		}
	}
}

// Loading a state from another dataset or order fails naming the field.
func TestLoadStateRefusesMismatch(t *testing.T) {
	dir := writeDataset(t, smallSpec)
	other := writeDataset(t, synth.Spec{Files: 2, RowsPerFile: 500, RowGroupRows: 100})
	o := checkedOptions(t, dir)
	o.Shuffle, o.NumSplits, o.WorldSize = true, 4, 2
	_, st := consume(t, open(t, o), 3)
	cases := []struct {
		field  string
		change func(*Options)
	}{
		{"seed", func(o *Options) { o.Seed++ }},
		{"shuffle", func(o *Options) { o.Shuffle = false }},
		{"clump_size", func(o *Options) { o.ClumpSize = 4 }},
		{"shuffle_window", func(o *Options) { o.ShuffleWindow = 1000; o.ChunkBytes = 1 }},
		{"num_splits", func(o *Options) { o.NumSplits = 8 }},
		{"columns", func(o *Options) { o.Columns = []string{"id"} }},
		{"drop_remainder", func(o *Options) { o.DropRemainder = true }},
		{"plan", func(o *Options) { o.URLs = []string{other} }},
		{"rank", func(o *Options) { o.Rank = 1 }},
		{"world_size", func(o *Options) { o.WorldSize = 4 }},
	}
	for _, c := range cases {
		oo := o
		c.change(&oo)
		err := open(t, oo).LoadStateDict(st)
		if !errors.Is(err, checkpoint.ErrMismatch) {
			t.Fatalf("%s: got %v, want ErrMismatch", c.field, err)
		}
		if want := "field " + c.field; !strings.Contains(err.Error(), want) {
			t.Fatalf("%s: error %q does not name the field", c.field, err)
		}
	}
	bad := st.Clone()
	bad.Cursors[0].Offset = 1 << 40
	if err := open(t, o).LoadStateDict(bad); err == nil {
		t.Fatal("a cursor past its window was accepted")
	}
}

func TestOpenErrors(t *testing.T) {
	dir := writeDataset(t, synth.Spec{Files: 1, RowsPerFile: 100})
	cases := []struct {
		name string
		o    Options
		want error
	}{
		{"no urls", Options{}, nil},
		{"splits not divisible", Options{URLs: []string{dir}, NumSplits: 6, WorldSize: 4}, nil},
		{"rank outside world", Options{URLs: []string{dir}, Rank: 2, WorldSize: 2}, nil},
		{"unknown column", Options{URLs: []string{dir}, Columns: []string{"id", "nope"}}, formats.ErrSchema},
		{"missing path", Options{URLs: []string{filepath.Join(dir, "nope.parquet")}}, nil},
		{"negative batch", Options{URLs: []string{dir}, BatchSize: -1}, nil},
	}
	for _, c := range cases {
		ds, err := Open(context.Background(), c.o)
		if err == nil {
			ds.Close()
			t.Fatalf("%s: Open succeeded", c.name)
		}
		if c.want != nil && !errors.Is(err, c.want) {
			t.Fatalf("%s: got %v, want %v", c.name, err, c.want)
		}
	}
}

// A second iteration while one runs is refused; breaking keeps the position.
func TestBreakKeepsPositionAndBusy(t *testing.T) {
	dir := writeDataset(t, smallSpec)
	o := checkedOptions(t, dir)
	ds := open(t, o)
	var ids []int64
	n := 0
	for b, err := range ds.Batches(context.Background()) {
		if err != nil {
			t.Fatal(err)
		}
		for _, err := range ds.Batches(context.Background()) {
			if !errors.Is(err, ErrBusy) {
				t.Fatalf("nested iteration: got %v, want ErrBusy", err)
			}
		}
		ids = append(ids, b.Column(0).(*array.Int64).Int64Values()...)
		n++
		if n == 5 {
			break
		}
	}
	rest, _ := consume(t, ds, -1)
	exactlyOnce(t, append(ids, allIDs(rest)...), smallSpec.Rows())
}

// A cancelled context ends the iteration with its error and leaks nothing.
func TestCancel(t *testing.T) {
	dir := writeDataset(t, smallSpec)
	o := checkedOptions(t, dir)
	o.Shuffle = true
	ds := open(t, o)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n := 0
	var last error
	for _, err := range ds.Batches(ctx) {
		if err != nil {
			last = err
			break
		}
		n++
		if n == 3 {
			cancel()
		}
	}
	if !errors.Is(last, context.Canceled) {
		t.Fatalf("got %v after cancel, want context.Canceled", last)
	}
}

// A transform's panic becomes an error naming the batch.
func TestMapPanicAndError(t *testing.T) {
	dir := writeDataset(t, smallSpec)
	o := checkedOptions(t, dir)
	ds := open(t, o)
	var n atomic.Int64 // the transform runs on several goroutines
	var got error
	for _, err := range Map(context.Background(), ds, func(_ context.Context, b arrow.RecordBatch) (int, error) {
		if n.Add(1) == 4 {
			panic("boom")
		}
		return int(b.NumRows()), nil
	}) {
		if err != nil {
			got = err
			break
		}
	}
	if got == nil || !strings.Contains(got.Error(), "batch") || !strings.Contains(got.Error(), "boom") {
		t.Fatalf("got %v, want an error naming the batch and the panic", got)
	}
	want := errors.New("bad batch")
	for _, err := range Map(context.Background(), ds, func(context.Context, arrow.RecordBatch) (int, error) { return 0, want }) {
		if !errors.Is(err, want) {
			t.Fatalf("got %v, want the transform's error", err)
		}
		break
	}
}
