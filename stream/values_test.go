package stream_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicedata/sluice/formats"
	"github.com/sluicedata/sluice/formats/text"
	"github.com/sluicedata/sluice/internal/testkit/sample"
	vc "github.com/sluicedata/sluice/internal/testkit/valuecheck"
	"github.com/sluicedata/sluice/internal/testkit/valuecheck/matrix"
	"github.com/sluicedata/sluice/stream"
)

// The value matrix: every value of every row that any combination of
// options delivers is its row's (internal/testkit/valuecheck), and every row that
// should come comes once. A case is a dataset (one of every format the
// project reads, in row groups from one row to more than a shuffle window)
// and options drawn at random from a seed: shuffle, clumps, windows, chunk
// sizes, a filter on selected or unselected, numeric or string columns,
// column subsets in any order, batch and read-batch sizes, every
// concurrency and prefetch bound, splits and world sizes, and a mode: a
// plain epoch on every rank, a resume at random batches on another world
// size and batch size, Take against the streamed order, a mix of two
// sources, a streaming split, Map, and the typed outputs Rows and Matrices.
//
// CI runs the cases that fit in about a minute (fewer under -race); -soak N
// runs N cases, and -valuecheck.seed picks the first. A failure prints the
// case's seed and options: `go test ./stream -run TestValueMatrix
// -valuecheck.seed S -soak 1` runs that case alone.
//
// It was checked to fail under each of these mutations (by hand, each
// reverted):
//   - the recycler handing out its class's spare capacity (allocate returning
//     whole[:size:c]): wrong strings and kernel panics in filtered shuffled
//     cases within the first few dozen cases;
//   - a buffer handed out twice (allocate leaving a reused buffer on its free
//     list): values of one row in another's;
//   - a row dropped in a filter mask (filter's evaluation clearing the first
//     passing row of each batch): an id wanted and never delivered;
//   - an off-by-one in a string gather (gatherVar copying each value from one
//     byte later): a mismatch on the first shuffled case with strings.
//
// The cases the outside probe reported are seeds of FuzzValueOptions'
// corpus, and TestValueProbeCases runs them as written.
func TestValueMatrix(t *testing.T) {
	set := matrix.Write(t)
	n := stream.SoakCases()
	budget := time.Duration(0)
	if n == 0 {
		n = 1 << 30
		budget = 45 * time.Second
		if testing.Short() {
			budget = 10 * time.Second
		}
	}
	start := time.Now()
	ran := 0
	// At least eight cases however slow the machine (a budget alone failed a
	// loaded CI machine that ran fewer), three under -short, where the
	// race detector watches the pipeline's goroutines meet.
	least := sample.Count(8, 3)
	for i := range n {
		if budget > 0 && ran >= least && time.Since(start) > budget {
			break
		}
		seed := *valueSeed + uint64(i)
		c := matrix.Draw(set, matrix.NewSeeded(seed))
		if err := c.Run(context.Background()); err != nil {
			t.Fatalf("case seed %d (%s): %v\nrerun: go test ./stream -run TestValueMatrix -valuecheck.seed %d -soak 1", seed, c, err, seed)
		}
		ran++
	}
	t.Logf("%d cases in %v", ran, time.Since(start).Round(time.Millisecond))
}

// FuzzValueOptions is the value matrix driven by a fuzzer: its bytes make
// the case's choices (two a choice, see matrix.FromBytes). Its corpus is
// the matrix cases that failed before their faults were fixed, as the
// matrix draws them from their seeds (valueCorpusSeeds):
//   - 54: a shuffled, filtered read whose filter emptied a window, which was
//     then permuted (a panic in the gather of columns without a fast path);
//   - 894, 1146, 2442: the outside probe's case, a shuffled read of one
//     24,925-row group with a filter and a string column (the recycler's
//     spare capacity: a panic in arrow's take kernel, or strings of zeros).
//
// Run it with `go test ./stream -run '^$' -fuzz FuzzValueOptions -timeout 0`.
func FuzzValueOptions(f *testing.F) {
	if testing.Short() {
		// The seeds are cases of the whole dataset set, of which -short
		// writes a part (matrix.Write), so they would draw other cases:
		// TestValueMatrix's. CI's pass without -short runs them as found.
		f.Skip("the corpus seeds are cases of the full dataset set: run without -short")
	}
	set := matrix.Write(f)
	for _, seed := range valueCorpusSeeds {
		b, err := matrix.Bytes(set, seed)
		if err != nil {
			f.Fatalf("corpus seed %d: %v", seed, err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, choices []byte) {
		ch := matrix.FromBytes(choices)
		c := matrix.Draw(set, &ch)
		if err := c.Run(context.Background()); err != nil {
			t.Fatalf("%s: %v", c, err)
		}
	})
}

// valueCorpusSeeds are the matrix seeds whose cases seed the fuzzer.
var valueCorpusSeeds = []uint64{54, 894, 1146, 2442}

// TestValueProbeCases are the cases an outside probe found wrong, as it
// wrote them: a shuffled, filtered read of a string column from one row
// group (22,000 rows panicked in arrow's take kernel; 24,925 gave a string
// of zero bytes), and the filtered CSV read that gave "s4\x00\x00" for
// "s437".
func TestValueProbeCases(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	cols := vc.Pick("id", "tag")
	for _, n := range []int64{22_000, 24_925} {
		path := filepath.Join(dir, fmt.Sprintf("one-group-%d.parquet", n))
		if err := vc.WriteParquet(path, cols, 0, n, vc.Parquet{}); err != nil {
			t.Fatal(err)
		}
		for _, flt := range []string{"tag <> 's7'", "unit > 0.5"} {
			o := stream.Options{URLs: []string{path}, Columns: []string{"id", "tag"}, Filter: flt, Shuffle: true, Seed: 1}
			if flt == "unit > 0.5" {
				// The string read only by the filter, x selected.
				if err := vc.WriteParquet(path, vc.Pick("id", "tag", "unit"), 0, n, vc.Parquet{}); err != nil {
					t.Fatal(err)
				}
				o.Columns = []string{"id", "unit"}
				o.Filter = "unit > 0.5 AND tag <> 's7'"
			}
			probeEpoch(t, ctx, o, n)
		}
	}
	csvDir := filepath.Join(dir, "csv")
	if err := mkdir(csvDir); err != nil {
		t.Fatal(err)
	}
	if err := vc.WriteCSV(filepath.Join(csvDir, "a.csv"), vc.Pick("id", "tag"), 0, 200_000); err != nil {
		t.Fatal(err)
	}
	probeEpoch(t, ctx, stream.Options{URLs: []string{csvDir}, Formats: []formats.Format{text.New(text.CSV, text.Options{})},
		Filter: "id BETWEEN 60000 AND 170000 AND NOT (tag = 's7')", Shuffle: true, ClumpSize: 16, ChunkBytes: 100000,
		NumSplits: 24, BatchSize: 37, Epoch: 1}, 200_000)
}

// TestValueProbeMix is the probe's mix: two shuffled Parquet sources of
// ids and lists of strings, 50,000 rows each (one row's tag came as "t0"
// where "t475" was written) and 5,000 (a panic), NumSplits 2, weights
// 0.6 and 0.4: every value of every row of two epochs is its row's (it
// panics with the recycler as it was, whose buffers had spare capacity).
func TestValueProbeMix(t *testing.T) {
	ctx := context.Background()
	for _, n := range []int64{5_000, 50_000} {
		var srcs []stream.MixSource
		for k, w := range []float64{0.6, 0.4} {
			// Each source a Parquet file of one row group, its own ids.
			dir := filepath.Join(t.TempDir(), fmt.Sprint(k))
			if err := mkdir(dir); err != nil {
				t.Fatal(err)
			}
			if err := vc.WriteParquet(filepath.Join(dir, "a.parquet"), vc.Pick("id", "tags"), int64(k)*n, n, vc.Parquet{}); err != nil {
				t.Fatal(err)
			}
			ds, err := stream.Open(ctx, stream.Options{URLs: []string{dir}, Shuffle: true, Seed: uint64(k + 1), NumSplits: 2})
			if err != nil {
				t.Fatal(err)
			}
			defer ds.Close()
			srcs = append(srcs, stream.MixSource{Dataset: ds, Weight: w})
		}
		m, err := stream.Mix(srcs, stream.MixOptions{Seed: 3})
		if err != nil {
			t.Fatal(err)
		}
		rows := 0
		for range 2 {
			for b, err := range m.Batches(ctx) {
				if err != nil {
					t.Fatal(err)
				}
				if _, err := vc.Batch(b, []string{"id", "tags"}); err != nil {
					t.Fatalf("%d rows a source: %v", n, err)
				}
				rows += int(b.NumRows())
			}
		}
		if rows == 0 {
			t.Fatal("the mix gave no rows")
		}
	}
}

// probeEpoch reads two epochs of o and checks every value and that every
// row passing the filter comes once in each.
func probeEpoch(t *testing.T, ctx context.Context, o stream.Options, n int64) {
	t.Helper()
	var keep func(int64) bool
	for _, f := range matrix.Filters {
		if f.Expr == o.Filter {
			keep = f.Keep
		}
	}
	switch o.Filter {
	case "unit > 0.5 AND tag <> 's7'":
		keep = func(id int64) bool { return vc.X(id) > 0.5 && vc.Tag(id) != "s7" }
	case "id BETWEEN 60000 AND 170000 AND NOT (tag = 's7')":
		keep = func(id int64) bool { return id >= 60000 && id <= 170000 && vc.Tag(id) != "s7" }
	}
	if keep == nil {
		t.Fatalf("no predicate for %q", o.Filter)
	}
	ds, err := stream.Open(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	var want []int64
	for id := range n {
		if keep(id) {
			want = append(want, id)
		}
	}
	for range 2 {
		if err := vc.Exactly(ds.Batches(ctx), nil, want); err != nil {
			t.Fatalf("%s: %v", strings.Join(o.URLs, ","), err)
		}
	}
}

var valueSeed = flag.Uint64("valuecheck.seed", 1, "value matrix: the seed of the first case")

func mkdir(dir string) error { return os.MkdirAll(dir, 0o755) }
