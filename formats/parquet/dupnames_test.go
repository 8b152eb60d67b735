package parquet_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"
	pq "github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/sluicedata/sluice/filter"
	"github.com/sluicedata/sluice/formats"
	"github.com/sluicedata/sluice/formats/parquet"
)

// writeDuplicates writes a file whose top-level columns are named names:
// column i holds i*100 + row in 12 rows, in row groups of 4 rows, so a
// value names its column and its row. A column named "s" is a struct
// holding that value as its field "v".
func writeDuplicates(t testing.TB, path string, names []string, storeSchema bool) {
	t.Helper()
	mem := memory.DefaultAllocator
	var fields []arrow.Field
	var cols []arrow.Array
	for i, n := range names {
		b := array.NewInt64Builder(mem)
		for r := range 12 {
			b.Append(int64(i*100 + r))
		}
		col := arrow.Array(b.NewArray())
		fl := arrow.Field{Name: n, Type: arrow.PrimitiveTypes.Int64, Nullable: true}
		if n == "s" {
			st, err := array.NewStructArray([]arrow.Array{col}, []string{"v"})
			if err != nil {
				t.Fatal(err)
			}
			col.Release()
			col, fl.Type = st, st.DataType()
		}
		fields = append(fields, fl)
		cols = append(cols, col)
	}
	schema := arrow.NewSchema(fields, nil)
	rec := array.NewRecordBatch(schema, cols, 12)
	defer rec.Release()
	for _, c := range cols {
		c.Release()
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	aprops := pqarrow.DefaultWriterProps()
	if storeSchema {
		aprops = pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema())
	}
	w, err := pqarrow.NewFileWriter(schema, f, pq.NewWriterProperties(pq.WithMaxRowGroupLength(4)), aprops)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// int64s returns the values of a column read as int64 or as a struct of one
// int64 field.
func int64s(t *testing.T, a arrow.Array) []int64 {
	t.Helper()
	if st, ok := a.(*array.Struct); ok {
		a = st.Field(0)
	}
	return slices.Clone(a.(*array.Int64).Int64Values())
}

// Top-level columns of one name read under DuckDB's names for them (see
// uniqueNames), each with its own values, and a projection and a filter can
// name each.
func TestDuplicateColumnNames(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		names, want []string
	}{
		{[]string{"id", "x", "id"}, []string{"id", "x", "id_1"}},
		{[]string{"id", "id", "id_1", "id"}, []string{"id", "id_1", "id_1_1", "id_2"}},
		{[]string{"id_1", "id", "id"}, []string{"id_1", "id", "id_1_1"}},
		{[]string{"s", "x", "s"}, []string{"s", "x", "s_1"}},
	} {
		for _, stored := range []bool{false, true} {
			t.Run(fmt.Sprintf("%v stored=%v", c.names, stored), func(t *testing.T) {
				path := filepath.Join(t.TempDir(), "dup.parquet")
				writeDuplicates(t, path, c.names, stored)
				ds, cols := readFile(t, path)
				if !slices.Equal(ds.Columns, c.want) {
					t.Fatalf("columns %q, want %q", ds.Columns, c.want)
				}
				for i := range c.want {
					if got := int64s(t, cols[i]); len(got) != 12 || got[0] != int64(i*100) || got[11] != int64(i*100+11) {
						t.Errorf("column %q: %v", c.want[i], got)
					}
				}
				// The last column alone, by its new name, and with a filter
				// on it, which prunes the row groups by its statistics (a
				// struct's field is not a column a filter names).
				last := len(c.want) - 1
				name := c.want[last]
				plans := []formats.PlanOptions{{Columns: []string{name}}}
				if c.names[last] != "s" {
					flt, err := filter.Parse(fmt.Sprintf("%s = %d", name, last*100+5))
					if err != nil {
						t.Fatal(err)
					}
					plans = append(plans, formats.PlanOptions{Columns: []string{name}, Filter: flt})
				}
				for _, opts := range plans {
					sub, err := planParquet(ctx, []string{path}, opts)
					if err != nil {
						t.Fatal(err)
					}
					if opts.Filter != nil {
						if pr, _ := (parquet.Format{}).Prune(ctx, sub.Fragments[0], opts.Filter); pr.Pruned != 2 {
							t.Errorf("%s: pruned %d of %d row groups, want 2", opts.Filter, pr.Pruned, pr.RowGroups)
						}
					}
					mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
					var got []int64
					rng := formats.Range{Start: -1, End: -1, FirstUnit: 0, EndUnit: len(sub.Fragments[0].Units)}
					err = sub.Read(compute.WithAllocator(ctx, mem), 0, rng, 16, mem, func(b arrow.RecordBatch) error {
						got = append(got, int64s(t, b.Column(0))...)
						b.Release()
						return nil
					})
					sub.Close()
					if err != nil {
						t.Fatal(err)
					}
					mem.AssertSize(t, 0)
					want := []int64{int64(last * 100), int64(last*100 + 11)}
					if opts.Filter != nil {
						want = []int64{int64(last*100 + 5)}
					}
					if len(got) != 12 && opts.Filter == nil || len(got) == 0 || got[0] != want[0] || got[len(got)-1] != want[len(want)-1] {
						t.Errorf("%+v: %v, want %v", opts, got, want)
					}
				}
			})
		}
	}
}
