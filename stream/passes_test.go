package stream

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/sluicedata/sluice/checkpoint"
	"github.com/sluicedata/sluice/formats"
	"github.com/sluicedata/sluice/formats/text"
	"github.com/sluicedata/sluice/internal/testkit/synth"
	"github.com/sluicedata/sluice/split"
)

// ShufflePasses mixes more for more I/O: on data sorted by a label of 10
// classes, in row groups of 1,000 rows and windows of 16 of them, the mean
// total variation distance between each batch's label histogram and the
// global one falls as the passes grow (each window is made of 16 × passes
// places), while the bytes read from storage grow as the passes, and the
// metrics say so: RefetchBytes is (passes - 1) times the epoch's stored
// bytes. Every row still comes once.
func TestShufflePassesMixing(t *testing.T) {
	if testing.Short() {
		t.Skip("reads 200k rows up to 8 times")
	}
	spec := synth.Spec{Files: 10, RowsPerFile: 20000, RowGroupRows: 1000, SortedLabels: true, StringBytes: 1, Classes: 10}
	dir := writeDataset(t, spec)
	const batch = 1024
	var prevTV float64
	var oneBytes int64
	for _, k := range []int{1, 2, 4, 8} {
		o := checkedOptions(t, dir)
		o.Columns = []string{"id"}
		o.Shuffle, o.ShuffleWindow, o.BatchSize, o.ShufflePasses = true, 16_000, batch, k
		ds := open(t, o)
		var unitBytes int64
		for _, f := range ds.Files() {
			for _, u := range f.Units {
				unitBytes += u.Bytes
			}
		}
		before := ds.Metrics().Snapshot()
		if got, want := before.RefetchBytes, int64(k-1)*unitBytes; got != want {
			t.Fatalf("%d passes: RefetchBytes %d, want %d (passes - 1 times the stored bytes)", k, got, want)
		}
		start := time.Now()
		bs, _ := consume(t, ds, -1)
		took := time.Since(start)
		read := ds.Metrics().Snapshot().Since(before).ReadBytes
		var ids []int64
		var tv []float64
		for _, b := range bs {
			ids = append(ids, b.ids...)
			labels := make([]int64, len(b.ids))
			for i, id := range b.ids {
				labels[i] = spec.Label(id)
			}
			tv = append(tv, tvd(labels, spec.Classes))
		}
		exactlyOnce(t, ids, spec.Rows())
		m := mean(tv)
		if k == 1 {
			oneBytes = read
		}
		ratio := float64(read) / float64(oneBytes)
		t.Logf("passes %d: mean TVD %.3f, read %d bytes (%.2f× one pass's), epoch in %v", k, m, read, ratio, took.Round(time.Millisecond))
		if k > 1 {
			if m > prevTV*0.8 {
				t.Errorf("%d passes mix to %.3f, not clearly better than %d passes (%.3f)", k, m, k/2, prevTV)
			}
			if ratio < 0.9*float64(k) || ratio > 1.1*float64(k) {
				t.Errorf("%d passes read %.2f× the bytes of one, want about %d×", k, ratio, k)
			}
		}
		prevTV = m
	}
}

// Passes are refused where they conflict, by the option they conflict
// with.
func TestShufflePassesRefused(t *testing.T) {
	dir := writeDataset(t, synth.Spec{Files: 2, RowsPerFile: 500, RowGroupRows: 100})
	o := checkedOptions(t, dir)
	o.ShufflePasses = 4
	for _, c := range []struct {
		name string
		set  func(*Options)
		want string
	}{
		{"unshuffled", func(*Options) {}, "needs Shuffle"},
		{"filter", func(o *Options) { o.Shuffle, o.Filter = true, "label = 3" }, "Filter"},
		{"negative", func(o *Options) { o.Shuffle, o.ShufflePasses = true, -1 }, "ShufflePasses -1"},
	} {
		oo := o
		c.set(&oo)
		if _, err := Open(context.Background(), oo); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error naming %q", c.name, err, c.want)
		}
	}
	csv := filepath.Join(t.TempDir(), "a.csv")
	if err := os.WriteFile(csv, []byte("id,label\n1,2\n3,4\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, equal := range []bool{false, true} {
		_, err := Open(context.Background(), Options{URLs: []string{csv}, Formats: []formats.Format{text.New(text.CSV, text.Options{})}, Shuffle: true, ShufflePasses: 2, EqualBatches: equal})
		if !errors.Is(err, split.ErrUnknownRows) || !strings.Contains(err.Error(), "ShufflePasses 2") || !strings.Contains(err.Error(), "a.csv") {
			t.Errorf("CSV (EqualBatches %t): %v, want ErrUnknownRows naming ShufflePasses and the file", equal, err)
		}
	}
}

// A state of 4 passes resumes at another world size into exactly the rest
// of the epoch, and refuses to load where the dataset reads one pass (or
// the other way round), naming the field.
func TestShufflePassesState(t *testing.T) {
	spec := synth.Spec{Files: 3, RowsPerFile: 3000, RowGroupRows: 500}
	dir := writeDataset(t, spec)
	o := checkedOptions(t, dir)
	o.Shuffle, o.ShufflePasses, o.NumSplits, o.ClumpSize = true, 4, 4, 8
	var ids []int64
	var states []State
	for rank := range 2 {
		oo := o
		oo.WorldSize, oo.Rank = 2, rank
		bs, st := consume(t, open(t, oo), 7+rank)
		for _, b := range bs {
			ids = append(ids, b.ids...)
		}
		states = append(states, st)
	}
	merged, err := checkpoint.Merge(states...)
	if err != nil {
		t.Fatal(err)
	}
	if merged.ShufflePasses != 4 {
		t.Fatalf("merged state has ShufflePasses %d", merged.ShufflePasses)
	}
	one := o
	one.ShufflePasses = 0
	if err := open(t, one).LoadStateDict(merged); !errors.Is(err, checkpoint.ErrMismatch) || !strings.Contains(err.Error(), "shuffle_passes") {
		t.Fatalf("a state of 4 passes loaded where the dataset reads 1: %v", err)
	}
	if err := open(t, o).LoadStateDict(open(t, one).StateDict()); !errors.Is(err, checkpoint.ErrMismatch) || !strings.Contains(err.Error(), "shuffle_passes") {
		t.Fatalf("a state of 1 pass loaded where the dataset reads 4: %v", err)
	}
	for rank := range 4 {
		oo := o
		oo.WorldSize, oo.Rank, oo.BatchSize = 4, rank, 33
		ds := open(t, oo)
		if err := ds.LoadStateDict(merged); err != nil {
			t.Fatal(err)
		}
		bs, _ := consume(t, ds, -1)
		for _, b := range bs {
			ids = append(ids, b.ids...)
		}
	}
	exactlyOnce(t, ids, spec.Rows())
}

// Take finds the rows of an epoch of passes where Batches delivers them.
func TestShufflePassesTake(t *testing.T) {
	spec := synth.Spec{Files: 2, RowsPerFile: 2000, RowGroupRows: 300}
	dir := writeDataset(t, spec)
	o := checkedOptions(t, dir)
	o.Shuffle, o.ShufflePasses, o.ClumpSize = true, 3, 5
	ds := open(t, o)
	bs, _ := consume(t, ds, -1)
	var order []int64
	for _, b := range bs {
		order = append(order, b.ids...)
	}
	exactlyOnce(t, order, spec.Rows())
	pos := []int64{0, 1, 2, 1999, 2000, 3999, 17, 17, 2500}
	b, err := ds.Take(context.Background(), 0, pos)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Release()
	got := b.Column(0).(*array.Int64).Int64Values()
	want := make([]int64, len(pos))
	for i, p := range pos {
		want[i] = order[p]
	}
	if !slices.Equal(got, want) {
		t.Fatalf("Take gave %v, the epoch has %v", got, want)
	}
}

// Rows an Iceberg position delete masks are gone before passes count:
// a pass keeps its clumps of the rows left, and every row left comes once.
func TestShufflePassesMasked(t *testing.T) {
	spec := synth.Spec{Files: 3, RowsPerFile: 1000, RowGroupRows: 150}
	dir := writeDataset(t, spec)
	plan := func(ctx context.Context, po formats.PlanOptions) (*formats.Scan, error) {
		sc, err := formats.Plan(ctx, []string{dir}, po)
		if err != nil {
			return nil, err
		}
		po.Masks = map[string]*formats.RowMask{}
		for _, f := range sc.Fragments {
			m := &formats.RowMask{Deleted: []int64{}}
			for r := int64(1); r < int64(spec.RowsPerFile); r += 3 {
				m.Deleted = append(m.Deleted, r)
			}
			po.Masks[f.URL] = m
		}
		sc.Close()
		return formats.Plan(ctx, []string{dir}, po)
	}
	var want []int64
	for _, passes := range []int{1, 3} {
		o := checkedOptions(t, dir)
		o.URLs, o.Plan = nil, plan
		o.Shuffle, o.ShufflePasses, o.NumSplits = true, passes, 2
		var ids []int64
		for rank := range 2 {
			oo := o
			oo.WorldSize, oo.Rank = 2, rank
			bs, _ := consume(t, open(t, oo), -1)
			for _, b := range bs {
				ids = append(ids, b.ids...)
			}
		}
		if passes == 1 {
			want = ids
			if n := int64(len(ids)); n != spec.Rows()-int64(spec.Files)*333 {
				t.Fatalf("the mask left %d rows", n)
			}
			continue
		}
		exactlyOnceOf(t, ids, want)
	}
}
