package parquet_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/extensions"
	"github.com/apache/arrow-go/v18/arrow/memory"
	pq "github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	pqschema "github.com/apache/arrow-go/v18/parquet/schema"

	"github.com/sluicedata/sluice/formats"
)

// writeOptionalMetadataVariant writes a file of an id and an optional
// VARIANT "v" whose metadata field is optional, as some writers declare it:
// rows 0 and 2 hold the integers 42 and 7, row 1 is null. With nullMetadata
// row 2's metadata is null, its value not.
func writeOptionalMetadataVariant(t testing.TB, path string, nullMetadata bool) {
	t.Helper()
	md, err := pqschema.NewPrimitiveNode("metadata", pq.Repetitions.Optional, pq.Types.ByteArray, -1, -1)
	if err != nil {
		t.Fatal(err)
	}
	val, err := pqschema.NewPrimitiveNode("value", pq.Repetitions.Required, pq.Types.ByteArray, -1, -1)
	if err != nil {
		t.Fatal(err)
	}
	v, err := pqschema.NewGroupNodeLogical("v", pq.Repetitions.Optional, pqschema.FieldList{md, val}, pqschema.VariantLogicalType{}, -1)
	if err != nil {
		t.Fatal(err)
	}
	id, err := pqschema.NewPrimitiveNode("id", pq.Repetitions.Required, pq.Types.Int64, -1, -1)
	if err != nil {
		t.Fatal(err)
	}
	root, err := pqschema.NewGroupNode("schema", pq.Repetitions.Required, pqschema.FieldList{id, v}, -1)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := file.NewParquetWriter(f, root)
	rg := w.AppendRowGroup()
	empty := pq.ByteArray{0x01, 0x00, 0x00} // version 1, no keys
	mdValues, mdLevels := []pq.ByteArray{empty, empty}, []int16{2, 0, 2}
	if nullMetadata {
		mdValues, mdLevels = mdValues[:1], []int16{2, 0, 1}
	}
	for _, write := range []func(file.ColumnChunkWriter) error{
		func(cw file.ColumnChunkWriter) error {
			_, err := cw.(*file.Int64ColumnChunkWriter).WriteBatch([]int64{0, 1, 2}, nil, nil)
			return err
		},
		func(cw file.ColumnChunkWriter) error {
			_, err := cw.(*file.ByteArrayColumnChunkWriter).WriteBatch(mdValues, mdLevels, nil)
			return err
		},
		func(cw file.ColumnChunkWriter) error { // int8 42 and int8 7
			_, err := cw.(*file.ByteArrayColumnChunkWriter).WriteBatch([]pq.ByteArray{{0x0c, 42}, {0x0c, 7}}, []int16{1, 0, 1}, nil)
			return err
		},
	} {
		cw, err := rg.NextColumn()
		if err != nil {
			t.Fatal(err)
		}
		if err := write(cw); err != nil {
			t.Fatal(err)
		}
		if err := cw.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if err := rg.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// optionalMetadataVariantFile is what writeOptionalMetadataVariant wrote
// (without nullMetadata, arrow-go v18.8.0), kept for the CLI's test against
// DuckDB and the fuzz seeds.
var optionalMetadataVariantFile = filepath.Join("testdata", "variant_optional_metadata.parquet")

// A VARIANT whose metadata field is optional (arrow-go refuses the file:
// "metadata field must be non-nullable binary type") reads as DuckDB reads
// it: 42, null, 7.
func TestVariantOptionalMetadata(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "variant.parquet")
	writeOptionalMetadataVariant(t, path, false)
	ds, cols := readFile(t, path)
	if _, ok := ds.Schema.Field(1).Type.(*extensions.VariantType); !ok {
		t.Fatalf("v read as %s", ds.Schema.Field(1).Type)
	}
	va := cols[1].(*extensions.VariantArray)
	if va.Len() != 3 || !va.IsNull(1) {
		t.Fatalf("v: %v", va)
	}
	for i, want := range map[int]any{0: int8(42), 2: int8(7)} {
		got, err := va.Value(i)
		if err != nil || got.Value() != want {
			t.Errorf("row %d: %v (%v), want %v", i, got, err, want)
		}
	}

	// Metadata null where the variant is not: the read fails at that row.
	bad := filepath.Join(dir, "bad.parquet")
	writeOptionalMetadataVariant(t, bad, true)
	sc, err := planParquet(context.Background(), []string{bad}, formats.PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	_, err = readColumns(context.Background(), sc, 0, 0, 3, memory.NewGoAllocator())
	if err == nil || !strings.Contains(err.Error(), `column "v" row 2: VARIANT value without metadata`) || !strings.Contains(err.Error(), "bad.parquet") {
		t.Errorf("metadata null: %v", err)
	}
}
