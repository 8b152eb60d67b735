package iceberg_test

import (
	"context"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	ice "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"

	"github.com/sluicedata/sluice/formats/iceberg"
	"github.com/sluicedata/sluice/internal/testkit/sample"
	vc "github.com/sluicedata/sluice/internal/testkit/valuecheck"
	"github.com/sluicedata/sluice/internal/testkit/valuecheck/matrix"
	"github.com/sluicedata/sluice/stream"
)

// valuesTable writes ids [0, n) of the value harness's columns that
// Iceberg types hold (integers, doubles, booleans, strings, a decimal, a
// date, timestamps with and without a zone, a list, a struct and a map) in
// data files of 1,500 rows and row groups of 200, deletes ids ≡ 7 (mod 50)
// by position and ids ≡ 13 (mod 50) by equality, and returns the table.
func valuesTable(t *testing.T, n int64) *iceberg.Table {
	t.Helper()
	cat, ident, tbl := valuesData(t, n)
	var byPos, byEq []int64
	for id := range n {
		switch id % 50 {
		case 7:
			byPos = append(byPos, id)
		case 13:
			byEq = append(byEq, id)
		}
	}
	return deleteAndOpen(t, cat, tbl, ident, byPos, byEq)
}

// valuesData creates the table of valuesTable, its rows written and none
// deleted.
func valuesData(t *testing.T, n int64) (catalog.Catalog, table.Identifier, *table.Table) {
	t.Helper()
	ctx := context.Background()
	cat := sqliteNamespace(t)
	ident := table.Identifier{"ns", "values"}
	schema := ice.NewSchema(0,
		ice.NestedField{ID: 1, Name: "id", Type: ice.PrimitiveTypes.Int64, Required: true},
		ice.NestedField{ID: 2, Name: "i32", Type: ice.PrimitiveTypes.Int32},
		ice.NestedField{ID: 3, Name: "unit", Type: ice.PrimitiveTypes.Float64},
		ice.NestedField{ID: 4, Name: "f64", Type: ice.PrimitiveTypes.Float64},
		ice.NestedField{ID: 5, Name: "b", Type: ice.PrimitiveTypes.Bool},
		ice.NestedField{ID: 6, Name: "text", Type: ice.PrimitiveTypes.String},
		ice.NestedField{ID: 7, Name: "tag", Type: ice.PrimitiveTypes.String},
		ice.NestedField{ID: 8, Name: "dec", Type: ice.DecimalTypeOf(18, 4)},
		ice.NestedField{ID: 9, Name: "date", Type: ice.PrimitiveTypes.Date},
		ice.NestedField{ID: 10, Name: "ts", Type: ice.PrimitiveTypes.Timestamp},
		ice.NestedField{ID: 11, Name: "tstz", Type: ice.PrimitiveTypes.TimestampTz},
		ice.NestedField{ID: 12, Name: "lst", Type: &ice.ListType{ElementID: 13, Element: ice.PrimitiveTypes.String}},
		ice.NestedField{ID: 14, Name: "st", Type: &ice.StructType{FieldList: []ice.NestedField{
			{ID: 15, Name: "a", Type: ice.PrimitiveTypes.Int32},
			{ID: 16, Name: "b", Type: ice.PrimitiveTypes.String},
		}}},
		ice.NestedField{ID: 17, Name: "mp", Type: &ice.MapType{KeyID: 18, KeyType: ice.PrimitiveTypes.String, ValueID: 19, ValueType: ice.PrimitiveTypes.Int64}},
	)
	tbl, err := cat.CreateTable(ctx, ident, schema, catalog.WithProperties(ice.Properties{
		"format-version": "2", table.WriteDeleteModeKey: table.WriteModeMergeOnRead,
		table.ParquetRowGroupLimitKey: "200",
	}))
	if err != nil {
		t.Fatal(err)
	}
	as, err := table.SchemaToArrowSchema(tbl.Schema(), nil, false, false)
	if err != nil {
		t.Fatal(err)
	}
	for from := int64(0); from < n; from += 1500 {
		rec, err := vc.RecordOf(memory.DefaultAllocator, as, from, min(1500, n-from))
		if err != nil {
			t.Fatal(err)
		}
		data := array.NewTableFromRecords(as, []arrow.RecordBatch{rec})
		rec.Release()
		tbl, err = tbl.AppendTable(ctx, data, 1500, nil)
		data.Release()
		if err != nil {
			t.Fatal(err)
		}
	}
	return cat, ident, tbl
}

// TestValueMatrixWithDeletes runs the value matrix (internal/testkit/valuecheck)
// over a table with position and equality deletes, and over a table
// migrated from Hive (migratedTable: partition columns only in manifests,
// fields found through the name mapping, Parquet and ORC files): every
// value of every row each case delivers is its row's, and every row left
// by the deletes (and the case's filter) comes once, shuffled, filtered,
// resumed on another world size, split, mapped and through the typed
// outputs.
func TestValueMatrixWithDeletes(t *testing.T) {
	const n = 6000
	tbl := valuesTable(t, n)
	migratedLoc, migratedRows := migratedTable(t)
	migrated, err := iceberg.Open(context.Background(), migratedLoc, iceberg.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer migrated.Close()
	set := matrix.Set{Datasets: []matrix.Dataset{{
		Name:    "iceberg-deletes",
		Plan:    tbl.Plan,
		Columns: []string{"id", "i32", "unit", "f64", "b", "text", "tag", "dec", "date", "ts", "tstz", "lst", "st", "mp"},
		Rows:    n,
		Deleted: func(id int64) bool { return id%50 == 7 || id%50 == 13 },
		// Equality deletes are applied while reading: counts are not
		// known before.
		Known: false,
	}, {
		Name:    "iceberg-migrated",
		Plan:    migrated.Plan,
		Columns: migratedColumns,
		Rows:    migratedRows,
		Deleted: func(id int64) bool { return id%50 == 7 },
		Known:   true,
	}}}
	// A filter on a column the projection leaves out, whose pages are
	// larger than every selected column chunk: the Parquet driver capped
	// page sizes by the selected chunks and refused the filter's pages as
	// corrupt ("compressed page size 6569 exceeds configured limit 1786").
	var want []int64
	textCol, _ := vc.ByName("text")
	for id := range int64(n) {
		if !set.Datasets[0].Deleted(id) && (textCol.Value(id) == nil || vc.X(id) < 0.25) {
			want = append(want, id)
		}
	}
	streamChecked(t, stream.Options{Plan: tbl.Plan, Columns: []string{"id", "b"}, Filter: "text IS NULL OR unit < 0.25"}, want)

	budget := 20 * time.Second
	if testing.Short() {
		budget = 5 * time.Second
	}
	start := time.Now()
	cases := 0
	for seed := uint64(1); cases < sample.Count(8, 3) || time.Since(start) < budget; seed++ {
		c := matrix.Draw(set, matrix.NewSeeded(seed))
		if err := c.Run(context.Background()); err != nil {
			t.Fatalf("case seed %d (%s): %v", seed, c, err)
		}
		cases++
	}
	t.Logf("%d cases in %v", cases, time.Since(start).Round(time.Millisecond))
}

// streamChecked streams o, checks every value of every row delivered
// (valuecheck) and the columns o selects (all of the batches' if none),
// and that the ids are want, each once.
func streamChecked(t *testing.T, o stream.Options, want []int64) {
	t.Helper()
	checkStream(t, o, want, false)
}

// streamHeld is streamChecked with every batch retained until the stream
// ends and checked after: memory reused too early shows as wrong values.
func streamHeld(t *testing.T, o stream.Options, want []int64) {
	t.Helper()
	checkStream(t, o, want, true)
}

func checkStream(t *testing.T, o stream.Options, want []int64, hold bool) {
	t.Helper()
	ctx := context.Background()
	ds, err := stream.Open(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	batches := ds.Batches(ctx)
	if hold {
		var held []arrow.RecordBatch
		defer func() {
			for _, b := range held {
				b.Release()
			}
		}()
		for b, err := range batches {
			if err != nil {
				t.Fatal(err)
			}
			b.Retain()
			held = append(held, b)
		}
		batches = func(yield func(arrow.RecordBatch, error) bool) {
			for _, b := range held {
				if !yield(b, nil) {
					return
				}
			}
		}
	}
	if err := vc.Exactly(batches, o.Columns, want); err != nil {
		t.Fatal(err)
	}
}
