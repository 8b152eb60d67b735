package exampledata

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// The files hold the rows, ids and row groups the Spec says, and the same Spec writes the same
// bytes.
func TestWrite(t *testing.T) {
	spec := Spec{Files: 3, RowsPerFile: 1000, RowGroupRows: 300, Classes: 4, Seed: 9}
	dir := filepath.Join(t.TempDir(), "data")
	if err := Write(dir, spec); err != nil {
		t.Fatal(err)
	}
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	next := int64(0)
	for i := range spec.Files {
		path := filepath.Join(dir, fmt.Sprintf("part-%05d.parquet", i))
		rdr, err := file.OpenParquetFile(path, false)
		if err != nil {
			t.Fatal(err)
		}
		if got := rdr.NumRowGroups(); got != 4 { // 300, 300, 300, 100
			t.Errorf("%s: %d row groups, want 4", path, got)
		}
		fr, err := pqarrow.NewFileReader(rdr, pqarrow.ArrowReadProperties{}, mem)
		if err != nil {
			t.Fatal(err)
		}
		tbl, err := fr.ReadTable(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		// The reader adds field-id metadata; names and types are what must match.
		if got := tbl.Schema(); got.NumFields() != Schema.NumFields() {
			t.Errorf("%s: schema %v, want %v", path, got, Schema)
		} else {
			for j, f := range got.Fields() {
				if want := Schema.Field(j); f.Name != want.Name || !arrow.TypeEqual(f.Type, want.Type) {
					t.Errorf("%s: field %d is %s %s, want %s %s", path, j, f.Name, f.Type, want.Name, want.Type)
				}
			}
		}
		for _, chunk := range tbl.Column(0).Data().Chunks() {
			for _, id := range chunk.(*array.Int64).Int64Values() {
				if id != next {
					t.Fatalf("%s: id %d, want %d", path, id, next)
				}
				next++
			}
		}
		for _, chunk := range tbl.Column(1).Data().Chunks() {
			for _, l := range chunk.(*array.Int64).Int64Values() {
				if l < 0 || l >= int64(spec.Classes) {
					t.Fatalf("%s: label %d outside [0, %d)", path, l, spec.Classes)
				}
			}
		}
		tbl.Release()
		rdr.Close()
	}
	if next != spec.Rows() {
		t.Errorf("%d rows, want %d", next, spec.Rows())
	}
	mem.AssertSize(t, 0)

	again := filepath.Join(t.TempDir(), "again")
	if err := Write(again, spec); err != nil {
		t.Fatal(err)
	}
	a, _ := os.ReadFile(filepath.Join(dir, "part-00001.parquet"))
	b, _ := os.ReadFile(filepath.Join(again, "part-00001.parquet"))
	if len(a) == 0 || string(a) != string(b) {
		t.Errorf("the same Spec wrote different files (%d and %d bytes)", len(a), len(b))
	}
}

func TestWriteRefusesAnEmptySpec(t *testing.T) {
	if err := Write(t.TempDir(), Spec{Files: 1, RowsPerFile: 10}); err == nil {
		t.Error("a Spec without RowGroupRows was accepted")
	}
}
