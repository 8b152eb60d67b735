package stream

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/sluicedata/sluice/checkpoint"
	"github.com/sluicedata/sluice/internal/testkit/synth"
)

// sortedSpec is label-sorted data of several files and row groups: the
// worst case for a shuffle, which the mixing estimate is about.
var sortedSpec = synth.Spec{Files: 4, RowsPerFile: 6000, RowGroupRows: 500, SortedLabels: true, Seed: 3}

// measuredMixing streams an epoch of ds and returns the bench's mixing
// figure of its batches, from the label column the files hold.
func measuredMixing(t *testing.T, ds *Dataset) float64 {
	t.Helper()
	var sum float64
	var n int
	for b, err := range ds.Batches(context.Background()) {
		if err != nil {
			t.Fatal(err)
		}
		labels := b.Column(int(b.Schema().FieldIndices("label")[0])).(*array.Int64)
		var hist [10]int64
		for _, l := range labels.Int64Values() {
			hist[l]++
		}
		var d float64
		for _, c := range hist {
			d += math.Abs(float64(c)/float64(labels.Len()) - 0.1)
		}
		sum += d / 2
		n++
	}
	return sum / float64(n)
}

// The estimate runs the stream's own order over the plan, so on a plan
// small enough for every window to be put in order it is the mixing an
// actual shuffled read of label-sorted data measures, batch for batch.
func TestEstimateIsMeasuredMixing(t *testing.T) {
	dir := writeDataset(t, sortedSpec)
	rowBytes := open(t, Options{URLs: []string{dir}, Columns: []string{"id", "label"}}).Estimate().RowBytes
	for _, tc := range []struct {
		name string
		set  func(*Options)
		// the mixing expected of the setting, for a sanity bound
		lo, hi float64
	}{
		{"window of one row group", func(o *Options) { o.ShuffleWindow = 500 }, 0.6, 0.95},
		{"window of 8 row groups", func(o *Options) { o.ShuffleWindow = 4000 }, 0.2, 0.6},
		{"clumps of 20", func(o *Options) { o.ShuffleWindow, o.ClumpSize = 8000, 20 }, 0.4, 0.8},
		{"memory of the whole dataset, 2 splits", func(o *Options) { o.ShuffleMemory, o.NumSplits = int64(rowBytes*24000)+1, 2 }, 0.05, 0.25},
		{"unshuffled", func(o *Options) { o.Shuffle = false }, 0.85, 0.91},
		// Passes keep strided clumps of their chunks: the estimate labels
		// a pass's k-th row as the file row the pass keeps, not the k-th
		// of its range.
		{"3 passes, window of 8 row groups", func(o *Options) { o.ShuffleWindow, o.ShufflePasses = 4000, 3 }, 0.1, 0.45},
		{"2 passes of clumps of 7, 2 splits", func(o *Options) { o.ShuffleWindow, o.ShufflePasses, o.ClumpSize, o.NumSplits = 2000, 2, 7, 2 }, 0.1, 0.8},
		{"4 passes, memory of the whole dataset", func(o *Options) { o.ShuffleMemory, o.ShufflePasses = int64(rowBytes*24000)+1, 4 }, 0.03, 0.2},
	} {
		o := Options{URLs: []string{dir}, Columns: []string{"id", "label"}, Shuffle: true, Seed: 9, Epoch: 1, BatchSize: 100}
		tc.set(&o)
		ds := open(t, o)
		est := ds.Estimate()
		got := measuredMixing(t, ds)
		if est.MixingBatches != 240 || math.Abs(est.Mixing-got) > 1e-9 {
			t.Errorf("%s: estimate %.4f over %d batches, measured %.4f over 240", tc.name, est.Mixing, est.MixingBatches, got)
		}
		if got < tc.lo || got > tc.hi {
			t.Errorf("%s: mixing %.3f, expected in [%.2f, %.2f]", tc.name, got, tc.lo, tc.hi)
		}
	}
}

// ShuffleMemory buys the rows its bytes hold at the plan's decoded row
// size, and the order is that of a ShuffleWindow of those rows: a state of
// one resumes the other.
func TestShuffleMemoryIsRows(t *testing.T) {
	dir := writeDataset(t, sortedSpec)
	base := Options{URLs: []string{dir}, Columns: []string{"id", "label", "x", "s"}, Shuffle: true, Seed: 5, BatchSize: 100}
	o := base
	o.ShuffleMemory = 1 << 20
	ds := open(t, o)
	est := ds.Estimate()
	// id, label, x: 8 bytes each; s: 16 characters and a 4-byte offset.
	if est.RowBytes < 44 || est.RowBytes > 44*1.15 {
		t.Errorf("decoded row estimate %.1f bytes, want about 44", est.RowBytes)
	}
	want := int(float64(1<<20) / est.RowBytes)
	if st := ds.StateDict(); st.ShuffleWindow != want || est.WindowRows != want {
		t.Fatalf("ShuffleMemory 1 MiB at %.1f bytes a row: window %d rows (state %d), want %d", est.RowBytes, est.WindowRows, st.ShuffleWindow, want)
	}
	byRows := base
	byRows.ShuffleWindow = want
	ds2 := open(t, byRows)
	if ds.StateDict().Fingerprint != ds2.StateDict().Fingerprint {
		t.Errorf("ShuffleMemory and the ShuffleWindow of its rows give other order fingerprints")
	}
	a, _ := consume(t, ds, 7)
	_, st := consume(t, ds2, 3)
	if err := ds.LoadStateDict(st); err != nil {
		t.Fatalf("a state of ShuffleWindow %d does not load into ShuffleMemory of the same rows: %v", want, err)
	}
	b, _ := consume(t, ds, 4)
	for i := range b {
		if !slices.Equal(a[3+i].ids, b[i].ids) {
			t.Fatalf("batch %d after the resume differs", 3+i)
		}
	}

	// Another ShuffleMemory is another window of rows: the refusal names
	// the window and the setting that resumes the state, not the plan that
	// the window's cuts changed.
	half := o
	half.ShuffleMemory = 1 << 19
	err := open(t, half).LoadStateDict(st)
	if !errors.Is(err, checkpoint.ErrMismatch) || !strings.Contains(err.Error(), "field shuffle_window") || !strings.Contains(err.Error(), fmt.Sprintf("ShuffleWindow %d", want)) {
		t.Errorf("a state of ShuffleMemory 1 MiB into 512 KiB: %v, want a mismatch naming shuffle_window and ShuffleWindow %d", err, want)
	}

	o.ShuffleWindow = 1000
	if _, err := Open(context.Background(), o); err == nil || !strings.Contains(err.Error(), "ShuffleWindow") || !strings.Contains(err.Error(), "ShuffleMemory") {
		t.Errorf("both ShuffleWindow and ShuffleMemory: %v, want an error naming both", err)
	}
	o.ShuffleWindow, o.ShuffleMemory = 0, -1
	if _, err := Open(context.Background(), o); err == nil {
		t.Errorf("negative ShuffleMemory accepted")
	}
}

// ShuffleMemory needs a row's bytes: a plan that knows no row count before
// reading is refused, naming what to set instead; an empty one opens.
func TestShuffleMemoryWithoutCounts(t *testing.T) {
	dir := t.TempDir()
	csv := filepath.Join(dir, "a.csv")
	if err := os.WriteFile(csv, []byte("id,label\n1,2\n3,4\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Open(context.Background(), Options{URLs: []string{csv}, Format: "csv", Shuffle: true, ShuffleMemory: 1 << 20})
	if err == nil || !strings.Contains(err.Error(), "ShuffleMemory") || !strings.Contains(err.Error(), "ShuffleWindow") {
		t.Errorf("ShuffleMemory over CSV of unknown counts: %v, want an error naming ShuffleMemory and ShuffleWindow", err)
	}
	empty := writeDataset(t, synth.Spec{Files: 2, RowsPerFile: 0})
	ds := open(t, Options{URLs: []string{empty}, Columns: []string{"id", "label"}, Shuffle: true, ShuffleMemory: 1 << 20})
	if n := countBatches(t, ds); n != 0 {
		t.Errorf("an empty dataset with ShuffleMemory streamed %d batches", n)
	}
	if e := ds.Estimate(); e.Windows != 0 || e.Mixing != -1 {
		t.Errorf("estimate of an empty dataset: %+v", e)
	}
}

// The ranks of a shared plan derive the same window from ShuffleMemory:
// ranks past 0 price rows from the footers the plan carries, and the
// plan records the rows.
func TestShuffleMemorySharedPlan(t *testing.T) {
	dir := writeDataset(t, smallSpec)
	ps := planStore(t)
	var ids []int64
	var window int
	for rank := range 2 {
		o := checkedOptions(t, dir)
		o.ShuffleWindow, o.ShuffleMemory = 0, 100_000
		o.Shuffle, o.Rank, o.WorldSize, o.PlanStore = true, rank, 2, ps
		ds := open(t, o)
		w := ds.StateDict().ShuffleWindow
		if rank == 0 {
			window = w
		} else if w != window {
			t.Fatalf("rank 1 derived a window of %d rows, rank 0 %d", w, window)
		}
		got, _ := consume(t, ds, -1)
		ids = append(ids, allIDs(got)...)
	}
	exactlyOnce(t, ids, int64(smallSpec.Files*smallSpec.RowsPerFile))
	raw, err := ps.Bucket.ReadAll(context.Background(), ps.Key)
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf(`"shuffle_window":%d`, window); !strings.Contains(string(raw), want) {
		t.Errorf("the shared plan does not record the window's rows (%s)", want)
	}
}
