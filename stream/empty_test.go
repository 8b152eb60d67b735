package stream

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/sluicedata/sluice/checkpoint"
	"github.com/sluicedata/sluice/formats"
	"github.com/sluicedata/sluice/formats/orc"
	"github.com/sluicedata/sluice/formats/text"
	"github.com/sluicedata/sluice/internal/testkit/orcwrite"
	"github.com/sluicedata/sluice/internal/testkit/synth"
	"github.com/sluicedata/sluice/stream/typed"
)

// emptyDatasets are datasets without a row in each format, by name, with
// the options that read them. They used to be refused ("stream: dataset
// has no rows") where counts were known, and read as empty where not.
func emptyDatasets(t *testing.T) map[string]Options {
	t.Helper()
	dir := t.TempDir()
	put := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	orcPath := filepath.Join(dir, "empty.orc")
	f, err := os.Create(orcPath)
	if err != nil {
		t.Fatal(err)
	}
	w, err := orcwrite.New(f, arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}, nil), orcwrite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	texts := text.All(text.Options{})
	return map[string]Options{
		"parquet":             {URLs: []string{writeDataset(t, synth.Spec{Files: 2, RowsPerFile: 0})}, Columns: []string{"id", "label"}},
		"parquet filtered":    {URLs: []string{writeDataset(t, synth.Spec{Files: 2, RowsPerFile: 0})}, Columns: []string{"id"}, Filter: "label > 3"},
		"orc":                 {URLs: []string{orcPath}, Formats: []formats.Format{orc.Format{}}},
		"csv header":          {URLs: []string{put("header.csv", "id,s\n")}, Formats: texts},
		"csv without a byte":  {URLs: []string{put("nothing.csv", "")}, Formats: texts},
		"json lines, no line": {URLs: []string{put("nothing.jsonl", "")}, Formats: texts},
	}
}

// An empty dataset opens and streams no rows and no batches, without an
// error, in every epoch and mode: shuffled, on any rank, resumed from its
// states (merged too), split among consumers, taken at no positions,
// through Map and the typed outputs.
func TestEmptyDatasetStreamsNothing(t *testing.T) {
	ctx := context.Background()
	for name, base := range emptyDatasets(t) {
		t.Run(name, func(t *testing.T) {
			checked := checkedOptions(t, base.URLs[0])
			base.Allocator = checked.Allocator
			for _, mode := range []struct {
				name   string
				change func(*Options)
			}{
				{"storage order", func(*Options) {}},
				{"shuffled", func(o *Options) { o.Shuffle, o.Seed, o.ClumpSize = true, 7, 4 }},
				{"rank 1 of 2", func(o *Options) { o.NumSplits, o.WorldSize, o.Rank, o.Shuffle = 4, 2, 1, true }},
				{"drop remainder", func(o *Options) { o.NumSplits, o.DropRemainder = 3, true }},
				{"shared plan", func(o *Options) { o.PlanStore = planStore(t) }},
			} {
				o := base
				mode.change(&o)
				ds := open(t, o)
				if ds.Schema().NumFields() == 0 && !strings.Contains(name, "without a byte") && !strings.Contains(name, "no line") {
					t.Fatalf("%s: no columns", mode.name)
				}
				for epoch := range int64(3) {
					if ds.Epoch() != epoch {
						t.Fatalf("%s: at epoch %d, want %d", mode.name, ds.Epoch(), epoch)
					}
					for b, err := range ds.Batches(ctx) {
						if err != nil {
							t.Fatalf("%s epoch %d: %v", mode.name, epoch, err)
						}
						b.Release()
						t.Fatalf("%s epoch %d: a batch of %d rows", mode.name, epoch, b.NumRows())
					}
				}
				st := ds.StateDict()
				again := open(t, o)
				if err := again.LoadStateDict(st); err != nil {
					t.Fatalf("%s: load its own state: %v", mode.name, err)
				}
				if n := countBatches(t, again); n != 0 || again.Epoch() != st.Epoch+1 {
					t.Fatalf("%s: resumed: %d batches, epoch %d", mode.name, n, again.Epoch())
				}
				if o.WorldSize == 2 {
					o0 := o
					o0.Rank = 0
					rank0 := open(t, o0)
					for range 3 {
						countBatches(t, rank0)
					}
					merged, err := checkpoint.Merge(st, rank0.StateDict())
					if err != nil {
						t.Fatalf("%s: merge ranks' states: %v", mode.name, err)
					}
					one := o
					one.WorldSize, one.Rank = 1, 0
					if err := open(t, one).LoadStateDict(merged); err != nil {
						t.Fatalf("%s: load the merged state at world size 1: %v", mode.name, err)
					}
				}
				b, err := ds.Take(ctx, 0, nil)
				if err != nil || b.NumRows() != 0 || !b.Schema().Equal(ds.Schema()) {
					t.Fatalf("%s: take of no positions: %v, %v", mode.name, b, err)
				}
				b.Release()
				if b, err := ds.Take(ctx, 0, []int64{0}); err == nil {
					b.Release()
					t.Fatalf("%s: took position 0 of no rows", mode.name)
				}
			}
			o := base
			split := o
			split.NumSplits = 2
			consumers, err := open(t, split).Consumers(2)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range consumers {
				if n := countBatches(t, c); n != 0 {
					t.Fatalf("streaming split: %d batches", n)
				}
				c.Close()
			}
			for n, err := range Map(ctx, open(t, o), func(context.Context, arrow.RecordBatch) (int, error) { return 1, nil }) {
				t.Fatalf("Map gave %d, %v", n, err)
			}
			for rows, err := range typed.Rows(ctx, open(t, o)) {
				t.Fatalf("Rows gave %v, %v", rows, err)
			}
		})
	}
}

func countBatches(t *testing.T, ds *Dataset) int {
	t.Helper()
	n := 0
	for b, err := range ds.Batches(context.Background()) {
		if err != nil {
			t.Fatal(err)
		}
		b.Release()
		n++
	}
	return n
}

// A mix cannot give an empty source its weight: it is refused, naming the
// source and what it was opened on.
func TestMixRefusesEmptySource(t *testing.T) {
	full := writeDataset(t, synth.Spec{Files: 1, RowsPerFile: 500, RowGroupRows: 100})
	empty := writeDataset(t, synth.Spec{Files: 1, RowsPerFile: 0})
	o := Options{Columns: []string{"id", "label"}, NumSplits: 2}
	a, b := o, o
	a.URLs, b.URLs = []string{full}, []string{empty}
	_, err := Mix([]MixSource{{Dataset: open(t, a), Weight: 0.7}, {Dataset: open(t, b), Weight: 0.3}}, MixOptions{})
	if !errors.Is(err, ErrEmpty) {
		t.Fatalf("err = %v, want ErrEmpty", err)
	}
	for _, want := range []string{"mix source 1", empty, "weight 0.3 cannot be honoured"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("err = %v, does not say %q", err, want)
		}
	}
}
