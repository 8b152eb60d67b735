package arrowfile_test

import (
	"context"
	"path/filepath"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/sluicedata/sluice/formats"
	"github.com/sluicedata/sluice/internal/testkit/arrowfile"
)

func TestMatch(t *testing.T) {
	for key, want := range map[string]bool{
		"a/b.arrow": true, "b.FEATHER": true, "c.ipc": true,
		"d.parquet": false, "e.arrows": false, "arrow": false, "f.arrow.tmp": false,
	} {
		if got := (arrowfile.Format{}).Match(key); got != want {
			t.Errorf("Match(%q) = %t, want %t", key, got, want)
		}
	}
}

// Decode reads a known range by its rows: the planner may hand it units
// wider than the rows (a split boundary inside a chunk), and only the rows
// come back, cut to BatchRows and projected onto the read schema.
func TestDecodeRowsWithinWiderUnits(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f.arrow")
	if err := arrowfile.WriteFile(path, 100, []int{5, 0, 8, 3}); err != nil {
		t.Fatal(err)
	}
	d, err := formats.Plan(context.Background(), []string{path}, formats.PlanOptions{Formats: []formats.Format{arrowfile.Format{}}})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	f := d.Fragments[0]
	schema := arrow.NewSchema([]arrow.Field{arrowfile.Schema.Field(3), arrowfile.Schema.Field(0)}, nil)
	r := &formats.Read{
		Range:     formats.Range{Start: 3, End: 14, FirstUnit: 0, EndUnit: 4},
		Schema:    schema,
		BatchRows: 4,
		Mem:       mem,
	}
	var ids []int64
	for b, err := range (arrowfile.Format{}).Decode(context.Background(), f, nil, r) {
		if err != nil {
			t.Fatal(err)
		}
		if b.NumRows() > 4 || !b.Schema().Equal(schema) {
			t.Fatalf("batch of %d rows, schema %s", b.NumRows(), b.Schema())
		}
		ids = append(ids, b.Column(1).(*array.Int64).Int64Values()...)
		b.Release()
	}
	if want := []int64{103, 104, 105, 106, 107, 108, 109, 110, 111, 112, 113}; !slices.Equal(ids, want) {
		t.Fatalf("read %v, want %v", ids, want)
	}
}
