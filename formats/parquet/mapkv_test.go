package parquet_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	pq "github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	pqschema "github.com/apache/arrow-go/v18/parquet/schema"

	"github.com/sluicedata/sluice/formats"
	"github.com/sluicedata/sluice/internal/testkit/duckdb"
)

// writeMapKeyValue writes a file of an id and a map "m" of string keys to
// optional int32 values whose repeated key_value group carries the legacy
// MAP_KEY_VALUE converted type (arrow-go adds the MAP logical type, see
// hiveMapKeyValue); with parentMap the parent group "m" is annotated MAP,
// else it has no annotation. Rows: {a=1, b=NULL}, null, {}, {c=3}.
func writeMapKeyValue(t testing.TB, path string, parentMap bool) {
	t.Helper()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	key, err := pqschema.NewPrimitiveNodeLogical("key", pq.Repetitions.Required, pqschema.StringLogicalType{}, pq.Types.ByteArray, -1, -1)
	must(err)
	val, err := pqschema.NewPrimitiveNode("value", pq.Repetitions.Optional, pq.Types.Int32, -1, -1)
	must(err)
	kv, err := pqschema.NewGroupNodeConverted("key_value", pq.Repetitions.Repeated, pqschema.FieldList{key, val}, pqschema.ConvertedTypes.MapKeyValue, -1)
	must(err)
	ct := pqschema.ConvertedTypes.None
	if parentMap {
		ct = pqschema.ConvertedTypes.Map
	}
	m, err := pqschema.NewGroupNodeConverted("m", pq.Repetitions.Optional, pqschema.FieldList{kv}, ct, -1)
	must(err)
	id, err := pqschema.NewPrimitiveNode("id", pq.Repetitions.Required, pq.Types.Int64, -1, -1)
	must(err)
	root, err := pqschema.NewGroupNode("schema", pq.Repetitions.Required, pqschema.FieldList{id, m}, -1)
	must(err)
	f, err := os.Create(path)
	must(err)
	w := file.NewParquetWriter(f, root)
	rg := w.AppendRowGroup()
	// Levels: m optional (1), map repeated (2), value optional (3).
	def, rep := []int16{2, 2, 0, 1, 2}, []int16{0, 1, 0, 0, 0}
	for _, write := range []func(file.ColumnChunkWriter) error{
		func(cw file.ColumnChunkWriter) error {
			_, err := cw.(*file.Int64ColumnChunkWriter).WriteBatch([]int64{0, 1, 2, 3}, nil, nil)
			return err
		},
		func(cw file.ColumnChunkWriter) error {
			_, err := cw.(*file.ByteArrayColumnChunkWriter).WriteBatch([]pq.ByteArray{pq.ByteArray("a"), pq.ByteArray("b"), pq.ByteArray("c")}, def, rep)
			return err
		},
		func(cw file.ColumnChunkWriter) error {
			_, err := cw.(*file.Int32ColumnChunkWriter).WriteBatch([]int32{1, 3}, []int16{3, 2, 0, 1, 3}, rep)
			return err
		},
	} {
		cw, err := rg.NextColumn()
		must(err)
		must(write(cw))
		must(cw.Close())
	}
	must(rg.Close())
	must(w.Close())
}

// hiveMapKeyValue writes writeMapKeyValue's file and gives its key_value
// group the UNKNOWN logical type beside MAP_KEY_VALUE, as parquet-mr (Hive)
// writes it: arrow-go's writer would not, so the footer's byte is patched.
// arrow-go writes the group's num_children (2), converted_type
// (MAP_KEY_VALUE, 2) and logicalType (MAP, union field 2) as the bytes
// found below; UNKNOWN is union field 11, an empty struct as MAP is.
func hiveMapKeyValue(t testing.TB, path string, parentMap bool) {
	t.Helper()
	writeMapKeyValue(t, path, parentMap)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	mapKV := []byte{0x15, 0x04, 0x15, 0x04, 0x4c, 0x2c, 0x00, 0x00}
	j := bytes.Index(b, mapKV)
	if j < 0 || bytes.Index(b[j+1:], mapKV) >= 0 {
		t.Fatalf("the key_value group's annotation is not where expected (%d)", j)
	}
	b[j+5] = 0xbc // field 11, delta 11 from 0
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// A map whose key_value group is annotated MAP_KEY_VALUE with parquet-mr's
// UNKNOWN logical type (arrow-go: "logical type Null cannot be applied to
// group node") reads as the map DuckDB gives and the writer wrote.
func TestMapKeyValue(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hive.parquet")
	hiveMapKeyValue(t, path, true)
	ds, cols := readFile(t, path)
	want := arrow.MapOf(arrow.BinaryTypes.String, arrow.PrimitiveTypes.Int32)
	if got := ds.Schema.Field(1).Type; !arrow.TypeEqual(got, want) {
		t.Fatalf("m read as %s, want %s", got, want)
	}
	rows := []string{"{a=1, b=NULL}", "", "{}", "{c=3}"} // "": null
	m := cols[1].(*array.Map)
	keys, items := m.Keys().(*array.String), m.Items().(*array.Int32)
	for i, w := range rows {
		if m.IsNull(i) != (w == "") {
			t.Fatalf("row %d: null %v, want %q", i, m.IsNull(i), w)
		}
		if m.IsNull(i) {
			continue
		}
		var parts []string
		lo, hi := m.ValueOffsets(i)
		for k := lo; k < hi; k++ {
			v := "NULL"
			if !items.IsNull(int(k)) {
				v = strconv.Itoa(int(items.Value(int(k))))
			}
			parts = append(parts, keys.Value(int(k))+"="+v)
		}
		if got := "{" + strings.Join(parts, ", ") + "}"; got != w {
			t.Errorf("row %d: %s, want %s", i, got, w)
		}
	}

	// DuckDB reads the same map.
	db := duckdb.ForTest(t)
	res, err := db.Query("SELECT typeof(m), m::VARCHAR FROM " + duckdb.Quote(path) + " ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rows) != len(rows) {
		t.Fatalf("DuckDB: %d rows", len(res.Rows))
	}
	for i, r := range res.Rows {
		got, _ := r[1].(string)
		if r[0] != "MAP(VARCHAR, INTEGER)" || got != rows[i] {
			t.Errorf("DuckDB row %d: %v, want %q", i, r, rows[i])
		}
	}

	// Without MAP on the parent, DuckDB reads the key_value group itself as
	// a map inside a struct, which arrow-go cannot: the file is refused,
	// named.
	bad := filepath.Join(t.TempDir(), "nomap.parquet")
	hiveMapKeyValue(t, bad, false)
	_, err = planParquet(context.Background(), []string{bad}, formats.PlanOptions{})
	if err == nil || !strings.Contains(err.Error(), "nomap.parquet") || !strings.Contains(err.Error(), `column "m.key_value": the repeated group "key_value" is annotated MAP_KEY_VALUE outside a MAP group`) {
		t.Errorf("MAP_KEY_VALUE without MAP: %v", err)
	}
}
