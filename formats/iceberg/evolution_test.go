package iceberg_test

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	ice "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"

	"github.com/sluicedata/sluice/formats/iceberg"
	"github.com/sluicedata/sluice/stream"
)

// evolvedRow is row i of the evolution table as JSON, in the schema before
// the evolution (after: false) or after it.
func evolvedRow(i int, after bool) string {
	x, k, score := "x", "k", "score"
	if after {
		x, k, score = "px", "key", "points"
	}
	s := fmt.Sprintf(`{"id":%d,"amount":"%d.%02d","point":{%q:%d,"y":%d.5`, i, i, i%100, x, i, i)
	if after {
		z := "null"
		if i >= 10 {
			z = fmt.Sprint(i * 10)
		}
		s += `,"z":` + z
	}
	s += fmt.Sprintf(`},"tags":[{%q:"t%d","v":%d},{%q:"u","v":%d}],"attrs":[{"key":"a","value":{%q:%d}}]`, k, i, i, k, -i, score, i)
	if after {
		flag := "true" // the initial default, for the rows written before
		if i >= 10 {
			flag = fmt.Sprint(i%2 == 1)
		}
		s += `,"flag":` + flag
	}
	return s + "}"
}

// TestSchemaEvolution writes a v3 table through iceberg-go, evolves its
// schema by field id (a decimal's precision promoted; a struct field, a
// field of a list's struct elements and one of a map's struct values
// renamed; a nested float promoted to double; a nested field added; a
// column added with an initial default) and appends again: every row
// reads in the current schema, the older rows with their data kept under
// the new names, the added nested field null and the added column its
// initial default.
func TestSchemaEvolution(t *testing.T) {
	ctx := context.Background()
	cat := sqliteNamespace(t)
	ident := table.Identifier{"ns", "evolved"}
	schema := ice.NewSchema(0,
		ice.NestedField{ID: 1, Name: "id", Type: ice.PrimitiveTypes.Int64},
		ice.NestedField{ID: 2, Name: "amount", Type: ice.DecimalTypeOf(5, 2)},
		ice.NestedField{ID: 3, Name: "point", Type: &ice.StructType{FieldList: []ice.NestedField{
			{ID: 4, Name: "x", Type: ice.PrimitiveTypes.Int64},
			{ID: 5, Name: "y", Type: ice.PrimitiveTypes.Float64},
		}}},
		ice.NestedField{ID: 6, Name: "tags", Type: &ice.ListType{ElementID: 7, Element: &ice.StructType{FieldList: []ice.NestedField{
			{ID: 8, Name: "k", Type: ice.PrimitiveTypes.String},
			{ID: 9, Name: "v", Type: ice.PrimitiveTypes.Int32},
		}}}},
		ice.NestedField{ID: 10, Name: "attrs", Type: &ice.MapType{KeyID: 11, KeyType: ice.PrimitiveTypes.String, ValueID: 12, ValueType: &ice.StructType{FieldList: []ice.NestedField{
			{ID: 13, Name: "score", Type: ice.PrimitiveTypes.Float32},
		}}}},
	)
	tbl, err := cat.CreateTable(ctx, ident, schema, catalog.WithProperties(ice.Properties{"format-version": "3"}))
	if err != nil {
		t.Fatal(err)
	}
	appendJSON := func(tbl *table.Table, from, to int, after bool) *table.Table {
		t.Helper()
		as, err := table.SchemaToArrowSchema(tbl.Schema(), nil, false, false)
		if err != nil {
			t.Fatal(err)
		}
		var lines []string
		for i := from; i < to; i++ {
			lines = append(lines, evolvedRow(i, after))
		}
		rec, _, err := array.RecordFromJSON(memory.DefaultAllocator, as, strings.NewReader("["+strings.Join(lines, ",")+"]"))
		if err != nil {
			t.Fatal(err)
		}
		data := array.NewTableFromRecords(as, []arrow.RecordBatch{rec})
		rec.Release()
		defer data.Release()
		if tbl, err = tbl.AppendTable(ctx, data, 64, nil); err != nil {
			t.Fatal(err)
		}
		return tbl
	}
	tbl = appendJSON(tbl, 0, 10, false)
	tx := tbl.NewTransaction()
	us := tx.UpdateSchema(true, false).
		UpdateColumn([]string{"amount"}, table.ColumnUpdate{FieldType: ice.Optional[ice.Type]{Valid: true, Val: ice.DecimalTypeOf(9, 2)}}).
		RenameColumn([]string{"point", "x"}, "px").
		RenameColumn([]string{"tags", "element", "k"}, "key").
		RenameColumn([]string{"attrs", "value", "score"}, "points").
		UpdateColumn([]string{"attrs", "value", "score"}, table.ColumnUpdate{FieldType: ice.Optional[ice.Type]{Valid: true, Val: ice.PrimitiveTypes.Float64}}).
		AddColumn([]string{"point", "z"}, ice.PrimitiveTypes.Int64, "", false, nil).
		AddColumn([]string{"flag"}, ice.PrimitiveTypes.Bool, "", false, ice.NewLiteral(true))
	if err := us.Commit(); err != nil {
		t.Fatal(err)
	}
	if tbl, err = tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	tbl = appendJSON(tbl, 10, 20, true)

	it, err := iceberg.OpenCatalog(ctx, cat, ident, iceberg.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	ds, err := stream.Open(ctx, stream.Options{Plan: it.Plan, Allocator: mem, BatchSize: 7})
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	if got, want := ds.Schema().String(), it.Schema().String(); got != want {
		t.Errorf("stream schema\n%s\nwant the table's\n%s", got, want)
	}
	var got []string
	for b, err := range ds.Batches(ctx) {
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if err := array.RecordToJSON(b, &buf); err != nil {
			t.Fatal(err)
		}
		b.Release()
		got = append(got, strings.Split(strings.TrimSpace(buf.String()), "\n")...)
	}
	// The expected rows go through the same JSON writer, from a record in
	// the table's current schema.
	var lines []string
	for i := range 20 {
		lines = append(lines, evolvedRow(i, true))
	}
	rec, _, err := array.RecordFromJSON(memory.DefaultAllocator, it.Schema(), strings.NewReader("["+strings.Join(lines, ",")+"]"))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := array.RecordToJSON(rec, &buf); err != nil {
		t.Fatal(err)
	}
	rec.Release()
	want := strings.Split(strings.TrimSpace(buf.String()), "\n")
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("rows:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// A filter on the added column: the older file has no statistics of
	// it and is not pruned; its rows pass by their initial default.
	ids := streamRows(t, stream.Options{Plan: it.Plan, Columns: []string{"id"}, Filter: "flag = true AND id >= 0"})
	if len(ids) != 15 {
		t.Errorf("flag = true kept %d rows, want 15 (10 by default, 5 written): %v", len(ids), ids)
	}
}
