package parquet_test

import (
	"encoding/binary"
	"fmt"
	"math"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/sluicedata/sluice/formats/parquet"
	"github.com/sluicedata/sluice/internal/testkit/duckdb"
)

const emptyGroupRows = 10

// emptyGroupFile writes a file whose schema holds empty groups: e (no
// fields), s.y (no fields, and no num_children at all), n (whose one
// field, m, is empty), beside the columns id, s.x and v. A writer writes
// chunks for the leaves only: three.
func emptyGroupFile(t testing.TB, path string) {
	var ids, xs, vs []byte
	var valid []bool
	for i := range emptyGroupRows {
		ids = binary.LittleEndian.AppendUint32(ids, uint32(i))
		valid = append(valid, i%3 != 0)
		if i%3 != 0 {
			xs = binary.LittleEndian.AppendUint64(xs, uint64(i*100))
		}
		vs = binary.LittleEndian.AppendUint64(vs, math.Float64bits(float64(i)+0.5))
	}
	levels := parquet.HandLevels(valid)
	x := binary.LittleEndian.AppendUint32(nil, uint32(len(levels)))
	x = append(append(x, levels...), xs...)
	page := func(b []byte) []parquet.HandPage {
		return []parquet.HandPage{parquet.HandDataPageV1(emptyGroupRows, parquet.HandPlain, len(b), b)}
	}
	encs := []int32{parquet.HandPlain, parquet.HandRLE}
	parquet.HandFile(t, path, []parquet.HandElem{
		{Name: "schema", Phys: -1, Rep: -1, Children: 5},
		{Name: "id", Phys: 1, Rep: 0},
		{Name: "e", Phys: -1, Rep: 1, Children: 0},
		{Name: "s", Phys: -1, Rep: 0, Children: 2},
		{Name: "x", Phys: 2, Rep: 1},
		{Name: "y", Phys: -1, Rep: 1, NoChildren: true},
		{Name: "n", Phys: -1, Rep: 1, Children: 1},
		{Name: "m", Phys: -1, Rep: 1, Children: 0},
		{Name: "v", Phys: 5, Rep: 0},
	}, emptyGroupRows, []parquet.HandChunk{
		{Path: []string{"id"}, Phys: 1, Values: emptyGroupRows, Encodings: encs, Pages: page(ids)},
		{Path: []string{"s", "x"}, Phys: 2, Values: emptyGroupRows, Encodings: encs, Pages: page(x)},
		{Path: []string{"v"}, Phys: 5, Values: emptyGroupRows, Encodings: encs, Pages: page(vs)},
	})
}

// An empty group is no column: the file reads as its other columns, where
// it was refused as "3 column chunks for 6 columns" (arrow-go takes a
// schema element without children for a leaf).
func TestEmptyGroup(t *testing.T) {
	path := filepath.Join(t.TempDir(), "empty_group.parquet")
	emptyGroupFile(t, path)
	ds, cols := readFile(t, path)
	want := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int32},
		{Name: "s", Type: arrow.StructOf(arrow.Field{Name: "x", Type: arrow.PrimitiveTypes.Int64, Nullable: true})},
		{Name: "v", Type: arrow.PrimitiveTypes.Float64},
	}, nil)
	if len(ds.Schema.Fields()) != 3 {
		t.Fatalf("schema %s, want %s", ds.Schema, want)
	}
	for i, f := range want.Fields() {
		if got := ds.Schema.Field(i); got.Name != f.Name || !arrow.TypeEqual(got.Type, f.Type) || got.Nullable != f.Nullable {
			t.Fatalf("schema %s, want %s", ds.Schema, want)
		}
	}
	ids, s, vs := cols[0].(*array.Int32), cols[1].(*array.Struct), cols[2].(*array.Float64)
	xs := s.Field(0).(*array.Int64)
	if ids.Len() != emptyGroupRows {
		t.Fatalf("%d rows", ids.Len())
	}
	for i := range emptyGroupRows {
		if ids.Value(i) != int32(i) || s.IsNull(i) || xs.IsNull(i) != (i%3 == 0) || !xs.IsNull(i) && xs.Value(i) != int64(i*100) || vs.Value(i) != float64(i)+0.5 {
			t.Errorf("row %d: %d %v %v %v", i, ids.Value(i), xs.IsNull(i), xs.Value(i), vs.Value(i))
		}
	}
	// DuckDB reads the same values from the file (it describes the empty
	// groups as STRUCT() columns, and refuses to read those: "Not
	// implemented Error: STRUCT()").
	db := duckdb.ForTest(t)
	res, err := db.Query("SELECT id, s.x, v FROM " + duckdb.Quote(path) + " ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rows) != emptyGroupRows {
		t.Fatalf("DuckDB: %d rows", len(res.Rows))
	}
	for i, r := range res.Rows {
		var x any
		if !xs.IsNull(i) {
			x = xs.Value(i)
		}
		if got, want := fmt.Sprintf("%v %v %v", r...), fmt.Sprintf("%v %v %v", ids.Value(i), x, vs.Value(i)); got != want {
			t.Errorf("row %d: DuckDB %s, sluice %s", i, got, want)
		}
	}
}
