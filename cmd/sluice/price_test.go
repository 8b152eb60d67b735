package main

import (
	"math"
	"strings"
	"testing"
)

// inspect prices the order it was given before reading data: the window
// that --shuffle-memory buys, its places and memory, and the mixing of
// --batch-size batches; more memory, more places, better mixing.
func TestInspectPrice(t *testing.T) {
	small := inspectJSON(t, dataDir, "--shuffle", "--seed", "3", "--shuffle-window", "250", "--batch-size", "100")
	p := small.Price
	if p.WindowRows != 250 || p.BatchSize != 100 || p.Windows == 0 || p.MinPlaces < 1 || p.Mixing <= 0 || p.MixingBatches == 0 || p.RowBytes <= 0 {
		t.Fatalf("price of a 250-row window: %+v", p)
	}
	whole := inspectJSON(t, dataDir, "--shuffle", "--seed", "3", "--shuffle-memory", "100M", "--batch-size", "100")
	q := whole.Price
	if want := int(math.Floor(100 << 20 / q.RowBytes)); q.WindowRows != want || q.ShuffleMemory != 100<<20 {
		t.Errorf("--shuffle-memory 100M at %.1f bytes a row: window %d rows, want %d", q.RowBytes, q.WindowRows, want)
	}
	if whole.Options.ShuffleWindow != q.WindowRows {
		t.Errorf("the order's window is %d rows, the price's %d", whole.Options.ShuffleWindow, q.WindowRows)
	}
	if q.Windows != 1 || q.MeanPlaces <= p.MeanPlaces || q.Mixing >= p.Mixing || q.WindowBytes <= p.WindowBytes {
		t.Errorf("a window of the whole dataset: %+v; of 250 rows: %+v", q, p)
	}
	out := ok(t, "inspect", dataDir, "--shuffle", "--shuffle-memory", "1M")
	for _, w := range []string{"shuffle window:", "what --shuffle-memory 1.0 MiB holds", "places:", "memory:", "mixing:"} {
		if !strings.Contains(out, w) {
			t.Errorf("inspect output lacks %q:\n%s", w, out)
		}
	}
	// Passes price the places they buy and the rows each window decodes:
	// its pieces' whole ranges, the other passes' rows too.
	passes := inspectJSON(t, dataDir, "--shuffle", "--seed", "3", "--shuffle-window", "250", "--batch-size", "100", "--shuffle-passes", "3").Price
	if passes.MeanPlaces <= p.MeanPlaces || passes.PeakBytes <= p.PeakBytes || passes.WindowBytes > p.WindowBytes || passes.DecodersPeak < passes.PeakBytes {
		t.Errorf("3 passes of 250-row windows: %+v; one pass: %+v", passes, p)
	}
	fails(t, exitUsage, []string{"--shuffle-passes"}, "inspect", dataDir, "--shuffle-passes", "-2")
	fails(t, exitUsage, []string{"--shuffle-window and --shuffle-memory"}, "inspect", dataDir, "--shuffle-window", "10", "--shuffle-memory", "1M")
	fails(t, exitUsage, []string{"--batch-size"}, "inspect", dataDir, "--batch-size", "-1")
}
