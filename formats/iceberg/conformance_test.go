package iceberg_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	ice "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"

	"github.com/sluicedata/sluice/formats/formatstest"
	"github.com/sluicedata/sluice/formats/iceberg"
)

// conformanceSchema is formatstest.Schema as an Iceberg schema.
var conformanceSchema = ice.NewSchema(0,
	ice.NestedField{ID: 1, Name: "id", Type: ice.PrimitiveTypes.Int64},
	ice.NestedField{ID: 2, Name: "f64", Type: ice.PrimitiveTypes.Float64},
	ice.NestedField{ID: 3, Name: "s", Type: ice.PrimitiveTypes.String},
	ice.NestedField{ID: 4, Name: "b", Type: ice.PrimitiveTypes.Bool},
	ice.NestedField{ID: 5, Name: "d", Type: ice.PrimitiveTypes.Date},
)

// conformanceTable makes a table through iceberg-go (an SQL catalog on
// SQLite, merge-on-read deletes), appends each of files as its own
// Parquet data files in row groups of formatstest.UnitRows rows, deletes
// the rows whose ids byPos picks by position and those eq picks by
// equality, and returns how to plan it as sluice reads it.
func conformanceTable(byPos, byEq func(id int64) bool) func(testing.TB, string, []arrow.RecordBatch) (formatstest.PlanFunc, []int64) {
	return func(tb testing.TB, _ string, files []arrow.RecordBatch) (formatstest.PlanFunc, []int64) {
		t := tb.(*testing.T)
		ctx := context.Background()
		cat := sqliteNamespace(t)
		ident := table.Identifier{"ns", "conformance"}
		tbl, err := cat.CreateTable(ctx, ident, conformanceSchema, catalog.WithProperties(ice.Properties{
			"format-version": "2", table.WriteDeleteModeKey: table.WriteModeMergeOnRead,
			table.ParquetRowGroupLimitKey: strconv.Itoa(formatstest.UnitRows),
		}))
		if err != nil {
			t.Fatal(err)
		}
		as, err := table.SchemaToArrowSchema(tbl.Schema(), nil, false, false)
		if err != nil {
			t.Fatal(err)
		}
		var pos, eq []int64
		for _, rec := range files {
			if rec.NumRows() == 0 {
				continue // iceberg-go writes no data file for no rows
			}
			for _, id := range rec.Column(0).(*array.Int64).Int64Values() {
				switch {
				case byPos(id):
					pos = append(pos, id)
				case byEq(id):
					eq = append(eq, id)
				}
			}
			// The table's Arrow schema carries its field ids.
			relabeled := array.NewRecordBatch(as, rec.Columns(), rec.NumRows())
			data := array.NewTableFromRecords(as, []arrow.RecordBatch{relabeled})
			relabeled.Release()
			tbl, err = tbl.AppendTable(ctx, data, rec.NumRows(), nil)
			data.Release()
			if err != nil {
				t.Fatal(err)
			}
		}
		if len(pos) > 0 {
			if tbl, err = tbl.Delete(ctx, ice.IsIn(ice.Reference("id"), pos...), nil); err != nil {
				t.Fatal(err)
			}
		}
		if len(eq) > 0 {
			commitEqualityDeletes(t, tbl, eq)
		}
		it, err := iceberg.OpenCatalog(ctx, cat, ident, iceberg.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { it.Close() })
		if st := it.Stats(); st.PositionDeleted != int64(len(pos)) {
			t.Fatalf("planned %+v, want %d rows deleted by position", st, len(pos))
		}
		return it.Plan, append(pos, eq...)
	}
}

func TestConformance(t *testing.T) {
	none := func(int64) bool { return false }
	for _, c := range []struct {
		name        string
		byPos, byEq func(int64) bool
	}{
		{"PositionDeletes", func(id int64) bool { return id%10 == 3 }, none},
		{"EqualityDeletes", func(id int64) bool { return id%10 == 3 }, func(id int64) bool { return id%25 == 7 }},
	} {
		t.Run(c.name, func(t *testing.T) {
			formatstest.Run(t, formatstest.Driver{
				Name:    fmt.Sprintf("iceberg (%s)", c.name),
				Dataset: conformanceTable(c.byPos, c.byEq),
			})
		})
	}
}
