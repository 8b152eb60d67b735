package iceberg_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	ice "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"

	"github.com/sluicedata/sluice/formats"
	"github.com/sluicedata/sluice/formats/iceberg"
	"github.com/sluicedata/sluice/stream"
)

// writeParquetRows writes rec as a Parquet file at the table's location
// name and returns its location and size.
func writeParquetRows(t *testing.T, tbl *table.Table, name string, rec arrow.RecordBatch) (string, int64) {
	t.Helper()
	local := filepath.Join(strings.TrimPrefix(tbl.Location(), "file://"), name)
	if err := os.MkdirAll(filepath.Dir(local), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(local)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w, err := pqarrow.NewFileWriter(rec.Schema(), f, parquet.NewWriterProperties(), pqarrow.DefaultWriterProps())
	if err == nil {
		if err = w.Write(rec); err == nil {
			err = w.Close()
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(local)
	if err != nil {
		t.Fatal(err)
	}
	return tbl.Location() + "/" + name, st.Size()
}

// plainTable creates ns.<name> with schema and adds one Parquet data file
// of rows given as JSON, written with the file schema fileSchema (no field
// ids unless its fields carry them); it returns the table.
func plainTable(t *testing.T, name string, schema *ice.Schema, fileSchema *arrow.Schema, rowsJSON string) *table.Table {
	t.Helper()
	ctx := context.Background()
	cat := sqliteNamespace(t)
	tbl, err := cat.CreateTable(ctx, table.Identifier{"ns", name}, schema, catalog.WithProperties(ice.Properties{"format-version": "2"}))
	if err != nil {
		t.Fatal(err)
	}
	rec, _, err := array.RecordFromJSON(memory.DefaultAllocator, fileSchema, strings.NewReader(rowsJSON))
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	loc, size := writeParquetRows(t, tbl, "data/part-0.parquet", rec)
	b, err := ice.NewDataFileBuilder(tbl.Spec(), ice.EntryContentData, loc, ice.ParquetFile, nil, nil, nil, rec.NumRows(), size)
	if err != nil {
		t.Fatal(err)
	}
	tx := tbl.NewTransaction()
	if err := tx.AddDataFiles(ctx, []ice.DataFile{b.Build()}, nil); err != nil {
		t.Fatal(err)
	}
	if tbl, err = tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	return tbl
}

// A position delete whose file_path is null names no data file: the spec
// requires the field, and the read is refused with the delete file and
// the row named, as Spark (Iceberg's Java reader) and iceberg-go refuse
// it; pyiceberg and Impala skip the row, which could bring back a row its
// writer deleted (docs/formats.md). A null pos is refused alike.
func TestPositionDeleteNulls(t *testing.T) {
	ctx := context.Background()
	schema := ice.NewSchema(0, ice.NestedField{ID: 1, Name: "id", Type: ice.PrimitiveTypes.Int64})
	fileSchema := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true}}, nil)
	for _, c := range []struct {
		name, rows, want string
	}{
		{"null-path", `[{"file_path": "%s", "pos": 0}, {"file_path": "%[1]s", "pos": 2}, {"file_path": "%[1]s", "pos": 3}, {"file_path": null, "pos": 1}]`,
			"row 3 has a null file_path (pos 1), which the spec requires"},
		{"null-pos", `[{"file_path": "%s", "pos": 0}, {"file_path": "%[1]s", "pos": null}]`,
			`row 1 has a null pos (file_path "%s"), which the spec requires`},
	} {
		t.Run(c.name, func(t *testing.T) {
			tbl := plainTable(t, "t", schema, fileSchema, `[{"id": 0}, {"id": 1}, {"id": 2}, {"id": 3}, {"id": 4}]`)
			dataLoc := tbl.Location() + "/data/part-0.parquet"
			del := arrow.NewSchema([]arrow.Field{
				{Name: "file_path", Type: arrow.BinaryTypes.String, Nullable: true},
				{Name: "pos", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
			}, nil)
			rec, _, err := array.RecordFromJSON(memory.DefaultAllocator, del, strings.NewReader(fmt.Sprintf(c.rows, dataLoc)))
			if err != nil {
				t.Fatal(err)
			}
			defer rec.Release()
			delLoc, size := writeParquetRows(t, tbl, "data/deletes.parquet", rec)
			b, err := ice.NewDataFileBuilder(tbl.Spec(), ice.EntryContentPosDeletes, delLoc, ice.ParquetFile, nil, nil, nil, rec.NumRows(), size)
			if err != nil {
				t.Fatal(err)
			}
			tx := tbl.NewTransaction()
			if err := tx.NewRowDelta(nil).AddDeletes(b.Build()).Commit(ctx); err != nil {
				t.Fatal(err)
			}
			if tbl, err = tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			it, err := iceberg.Open(ctx, tbl.MetadataLocation(), iceberg.Options{})
			if err == nil {
				it.Close()
				t.Fatal("opened a table whose position delete has a null")
			}
			want := c.want
			if strings.Contains(want, "%s") {
				want = fmt.Sprintf(want, dataLoc)
			}
			if msg := err.Error(); !strings.Contains(msg, "position delete file "+delLoc+":") || !strings.Contains(msg, want) {
				t.Fatalf("error %q, want one naming %s and saying %q", msg, delLoc, want)
			}
		})
	}
}

// A required column the data file does not hold, by field id or through
// the name mapping, with no partition value or initial default to read
// as, is refused with the table, the file and the field id named; an
// optional one is null, as the spec says. So is a required nested field.
func TestUnresolvedColumns(t *testing.T) {
	ctx := context.Background()
	fileSchema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "st", Type: arrow.StructOf(arrow.Field{Name: "a", Type: arrow.PrimitiveTypes.Int32, Nullable: true}), Nullable: true},
	}, nil)
	rows := `[{"id": 1, "st": {"a": 10}}, {"id": 2, "st": null}]`

	// Optional fields the file lacks, top-level and nested: null.
	tbl := plainTable(t, "optional", ice.NewSchema(0,
		ice.NestedField{ID: 1, Name: "id", Type: ice.PrimitiveTypes.Int64},
		ice.NestedField{ID: 2, Name: "st", Type: &ice.StructType{FieldList: []ice.NestedField{
			{ID: 3, Name: "a", Type: ice.PrimitiveTypes.Int32},
			{ID: 5, Name: "b", Type: ice.PrimitiveTypes.String},
		}}},
		ice.NestedField{ID: 4, Name: "gone", Type: ice.PrimitiveTypes.String},
	), fileSchema, rows)
	it, err := iceberg.Open(ctx, tbl.MetadataLocation(), iceberg.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	got := streamRows(t, stream.Options{Plan: it.Plan})
	if want := []string{`1|{"a":10,"b":null}|(null)`, `2|(null)|(null)`}; strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("rows %q, want %q", got, want)
	}

	for _, c := range []struct {
		name   string
		schema *ice.Schema
		want   string
	}{
		{"top-level", ice.NewSchema(0,
			ice.NestedField{ID: 1, Name: "id", Type: ice.PrimitiveTypes.Int64},
			ice.NestedField{ID: 4, Name: "must", Type: ice.PrimitiveTypes.String, Required: true},
		), `required column "must" (field id 2) is not in the file`}, // ids as the catalog assigns them
		{"nested", ice.NewSchema(0,
			ice.NestedField{ID: 1, Name: "id", Type: ice.PrimitiveTypes.Int64},
			ice.NestedField{ID: 2, Name: "st", Type: &ice.StructType{FieldList: []ice.NestedField{
				{ID: 3, Name: "a", Type: ice.PrimitiveTypes.Int32},
				{ID: 5, Name: "b", Type: ice.PrimitiveTypes.String, Required: true},
			}}},
		), `column "st": required field "b" (field id 4) is not in the file`},
	} {
		t.Run(c.name, func(t *testing.T) {
			tbl := plainTable(t, c.name, c.schema, fileSchema, rows)
			it, err := iceberg.Open(ctx, tbl.MetadataLocation(), iceberg.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer it.Close()
			_, err = it.Plan(ctx, formats.PlanOptions{})
			if err == nil {
				t.Fatal("planned a table whose data file lacks a required column")
			}
			msg := err.Error()
			for _, w := range []string{tbl.MetadataLocation(), "/data/part-0.parquet", c.want} {
				if !strings.Contains(msg, w) {
					t.Fatalf("error %q does not say %q", msg, w)
				}
			}
		})
	}
}

// An identity partition value comes before the column's initial default,
// and a null one is null, not the default (v3); a column that is neither
// in the file nor partitioned reads as its initial default.
func TestPartitionBeforeDefault(t *testing.T) {
	ctx := context.Background()
	cat := sqliteNamespace(t)
	schema := ice.NewSchema(0,
		ice.NestedField{ID: 1, Name: "id", Type: ice.PrimitiveTypes.Int64},
		ice.NestedField{ID: 2, Name: "region", Type: ice.PrimitiveTypes.String, InitialDefault: "dflt", WriteDefault: "dflt"},
		ice.NestedField{ID: 3, Name: "extra", Type: ice.PrimitiveTypes.Int32, InitialDefault: int32(42), WriteDefault: int32(42)},
	)
	spec := ice.NewPartitionSpec(ice.PartitionField{SourceIDs: []int{2}, FieldID: 1000, Name: "region", Transform: ice.IdentityTransform{}})
	tbl, err := cat.CreateTable(ctx, table.Identifier{"ns", "defaults"}, schema, catalog.WithPartitionSpec(&spec),
		catalog.WithProperties(ice.Properties{"format-version": "3"}))
	if err != nil {
		t.Fatal(err)
	}
	fileSchema := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true}}, nil)
	var dfs []ice.DataFile
	for i, region := range []any{"r1", nil} {
		rec, _, err := array.RecordFromJSON(memory.DefaultAllocator, fileSchema, strings.NewReader(fmt.Sprintf(`[{"id": %d}, {"id": %d}]`, 2*i, 2*i+1)))
		if err != nil {
			t.Fatal(err)
		}
		loc, size := writeParquetRows(t, tbl, fmt.Sprintf("data/part-%d.parquet", i), rec)
		rec.Release()
		b, err := ice.NewDataFileBuilder(tbl.Spec(), ice.EntryContentData, loc, ice.ParquetFile, map[int]any{1000: region}, nil, nil, 2, size)
		if err != nil {
			t.Fatal(err)
		}
		dfs = append(dfs, b.FirstRowID(int64(2*i)).Build())
	}
	got := addAndRead(t, tbl, dfs...)
	if want := []string{"0|r1|42", "1|r1|42", "2|(null)|42", "3|(null)|42"}; strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("rows %q, want %q", got, want)
	}
}

// addAndRead adds data files to the table and streams its rows as
// streamRows renders them.
func addAndRead(t *testing.T, tbl *table.Table, dfs ...ice.DataFile) []string {
	t.Helper()
	ctx := context.Background()
	tx := tbl.NewTransaction()
	if err := tx.AddDataFiles(ctx, dfs, nil); err != nil {
		t.Fatal(err)
	}
	tbl, err := tx.Commit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	it, err := iceberg.Open(ctx, tbl.MetadataLocation(), iceberg.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	return streamRows(t, stream.Options{Plan: it.Plan})
}

// Nested fields a data file's struct lacks read by the same rule: an
// identity partition of the field (a partition source may be a struct's
// field), else its initial default, else null. A struct that is null in
// the file stays null.
func TestNestedPartitionAndDefault(t *testing.T) {
	ctx := context.Background()
	cat := sqliteNamespace(t)
	schema := ice.NewSchema(0,
		ice.NestedField{ID: 1, Name: "id", Type: ice.PrimitiveTypes.Int64},
		ice.NestedField{ID: 2, Name: "st", Type: &ice.StructType{FieldList: []ice.NestedField{
			{ID: 3, Name: "a", Type: ice.PrimitiveTypes.Int32},
			{ID: 4, Name: "b", Type: ice.PrimitiveTypes.String, InitialDefault: "bd", WriteDefault: "bd"},
			{ID: 5, Name: "c", Type: ice.PrimitiveTypes.Int64},
			{ID: 6, Name: "d", Type: ice.PrimitiveTypes.Float64},
		}}},
	)
	spec := ice.NewPartitionSpec(ice.PartitionField{SourceIDs: []int{5}, FieldID: 1000, Name: "c", Transform: ice.IdentityTransform{}})
	tbl, err := cat.CreateTable(ctx, table.Identifier{"ns", "nested"}, schema, catalog.WithPartitionSpec(&spec),
		catalog.WithProperties(ice.Properties{"format-version": "3"}))
	if err != nil {
		t.Fatal(err)
	}
	fileSchema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "st", Type: arrow.StructOf(arrow.Field{Name: "a", Type: arrow.PrimitiveTypes.Int32, Nullable: true}), Nullable: true},
	}, nil)
	rec, _, err := array.RecordFromJSON(memory.DefaultAllocator, fileSchema, strings.NewReader(`[{"id": 0, "st": {"a": 10}}, {"id": 1, "st": null}, {"id": 2, "st": {"a": null}}]`))
	if err != nil {
		t.Fatal(err)
	}
	loc, size := writeParquetRows(t, tbl, "data/part-0.parquet", rec)
	rec.Release()
	b, err := ice.NewDataFileBuilder(tbl.Spec(), ice.EntryContentData, loc, ice.ParquetFile, map[int]any{1000: int64(77)}, nil, nil, 3, size)
	if err != nil {
		t.Fatal(err)
	}
	got := addAndRead(t, tbl, b.FirstRowID(0).Build())
	want := []string{`0|{"a":10,"b":"bd","c":77,"d":null}`, `1|(null)`, `2|{"a":null,"b":"bd","c":77,"d":null}`}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("rows %q, want %q", got, want)
	}
}
