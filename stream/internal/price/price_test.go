package price

import (
	"math"
	"testing"

	"github.com/sluicedata/sluice/permutation"
	"github.com/sluicedata/sluice/split"
)

// epoch plans files of row groups of groupRows rows and returns an epoch
// of it with its chunks and the file rows.
func epoch(t *testing.T, files, groups int, groupRows int64, o permutation.Order) (*split.Epoch, []split.Chunk, []int64) {
	t.Helper()
	fs := make([]split.File, files)
	rows := make([]int64, files)
	for f := range fs {
		for range groups {
			fs[f].Units = append(fs[f].Units, split.Unit{Rows: groupRows, Bytes: groupRows * 40})
		}
		rows[f] = int64(groups) * groupRows
	}
	chunks := split.Chunks(fs, split.ChunkOptions{TargetBytes: 1, MaxRows: 1})
	ep, err := split.NewEpoch(chunks, o, 0)
	if err != nil {
		t.Fatal(err)
	}
	return ep, chunks, rows
}

// A sample of windows gives about the mixing of them all; the places and
// memory are the plan's.
func TestSampleAgreesWithAll(t *testing.T) {
	for _, tc := range []struct {
		name   string
		window int
		clump  int
	}{
		{"64 places", 64 * 1000, 1},
		{"16 places", 16 * 1000, 1},
		{"windows smaller than a batch's run", 1000, 1},
		{"clumps", 64 * 1000, 32},
	} {
		o := permutation.Order{Shuffle: true, Seed: 4, ShuffleWindow: tc.window, ClumpSize: tc.clump, NumSplits: 4}
		ep, chunks, rows := epoch(t, 8, 250, 1000, o) // 2M rows
		all := Of(Options{Epoch: ep, Chunks: chunks, FileRows: rows, BatchSize: 1024, RowBytes: 40, Budget: 1 << 30, Batches: 1 << 30})
		some := Of(Options{Epoch: ep, FileRows: rows, BatchSize: 1024, RowBytes: 40, Budget: 200_000, Batches: 150})
		if all.Batches < 1900 || some.Batches > 150 || some.Batches < 50 || some.SampledRows > 200_000+int64(tc.window) {
			t.Errorf("%s: %d batches of all, %d of the sample over %d rows", tc.name, all.Batches, some.Batches, some.SampledRows)
		}
		if d := math.Abs(all.Mixing - some.Mixing); d > 0.03 {
			t.Errorf("%s: mixing %.4f of all windows, %.4f of a sample", tc.name, all.Mixing, some.Mixing)
		}
		wantPlaces := float64(tc.window) / 1000
		if all.MinPlaces < 1 || all.MeanPlaces > wantPlaces || all.MeanPlaces < wantPlaces*0.9 {
			t.Errorf("%s: %.1f places a window (min %d), want about %.0f", tc.name, all.MeanPlaces, all.MinPlaces, wantPlaces)
		}
		if all.WindowBytes != all.MaxRows*40 || all.MaxRows > int64(tc.window) {
			t.Errorf("%s: window of %d rows, %d bytes", tc.name, all.MaxRows, all.WindowBytes)
		}
		// The plan's units store 40 bytes a row too.
		if all.StoredBytes != all.MaxRows*40 || some.StoredBytes != 0 {
			t.Errorf("%s: %d stored bytes in a window of %d rows (%d without chunks)", tc.name, all.StoredBytes, all.MaxRows, some.StoredBytes)
		}
	}
}

// Where a file's rows are not known before reading there is no mixing
// figure, and the windows' rows say so.
func TestUnknownRows(t *testing.T) {
	fs := []split.File{{Units: []split.Unit{{Rows: -1, Bytes: 100}, {Rows: -1, Bytes: 100}}}}
	ep, err := split.NewEpoch(split.Chunks(fs, split.ChunkOptions{TargetBytes: 1}), permutation.Order{Shuffle: true, ShuffleWindow: 10, NumSplits: 1}, 0)
	if err != nil {
		t.Fatal(err)
	}
	e := Of(Options{Epoch: ep, FileRows: []int64{-1}, BatchSize: 10, RowBytes: 8})
	if e.Mixing != -1 || e.MaxRows != -1 || e.WindowBytes != 0 || e.Windows != 2 {
		t.Errorf("unknown rows: %+v", e)
	}
}

// Batches of one row walk no more of the epoch than the sampled windows
// hold, and keep at most Options.Batches.
func TestOneRowBatches(t *testing.T) {
	o := permutation.Order{Shuffle: true, Seed: 1, ShuffleWindow: 64 * 1000, NumSplits: 2}
	ep, chunks, rows := epoch(t, 8, 250, 1000, o)
	e := Of(Options{Epoch: ep, Chunks: chunks, FileRows: rows, BatchSize: 1, Budget: 300_000, Batches: 500})
	// A batch of one row is one class: 0.9 from the uniform histogram.
	if e.Batches == 0 || e.Batches > 500 || math.Abs(e.Mixing-0.9) > 1e-9 {
		t.Errorf("one-row batches: %d batches, mixing %.4f", e.Batches, e.Mixing)
	}
}

// With passes a window's pieces read, fetch and decode the other passes'
// rows of their ranges too: the stored and decoded bytes count them, the
// window's own bytes do not.
func TestPassesReadTheirRanges(t *testing.T) {
	for _, passes := range []int{1, 2, 4} {
		o := permutation.Order{Shuffle: true, Seed: 4, ShuffleWindow: 8000, NumSplits: 1, Passes: passes}
		ep, chunks, rows := epoch(t, 2, 8, 1000, o)
		e := Of(Options{Epoch: ep, Chunks: chunks, FileRows: rows, BatchSize: 100, RowBytes: 10, Decoders: 3, Shuffled: true})
		if e.MaxRows != 8000 || e.WindowBytes != 80_000 {
			t.Fatalf("%d passes: windows of %d rows, %d bytes, want 8000 and 80000", passes, e.MaxRows, e.WindowBytes)
		}
		// Whole row groups of 1000 rows: every piece reads its chunk.
		if want := int64(passes) * 8000; e.SpanRows != want || e.DecodedBytes != want*10 || e.StoredBytes != want*40 {
			t.Errorf("%d passes: pieces read %d rows, %d bytes decoded, %d stored; want %d rows", passes, e.SpanRows, e.DecodedBytes, e.StoredBytes, want)
		}
		// Two windows of 8000 rows, both decoded at once by 3 decoders:
		// each its stored bytes, its pieces' rows and its permuted copy.
		if want := 2 * (int64(passes)*8000*40 + (int64(passes)+1)*8000*10); e.Windows != 2 || e.DecodersPeakBytes != want {
			t.Errorf("%d passes: %d windows hold %d bytes at once, want 2 and %d", passes, e.Windows, e.DecodersPeakBytes, want)
		}
	}
}
