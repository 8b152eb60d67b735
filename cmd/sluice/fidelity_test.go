package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	pqschema "github.com/apache/arrow-go/v18/parquet/schema"

	"github.com/sluicedata/sluice/internal/testkit/corpus"
	"github.com/sluicedata/sluice/internal/testkit/duckdb"
)

// typedColumn is one required column of a file written by writeTyped.
type typedColumn struct {
	name    string
	logical pqschema.LogicalType
	phys    parquet.Type
	typeLen int
	// Values: []parquet.ByteArray, []parquet.FixedLenByteArray or []int64.
	values any
}

// writeTyped writes one row group of required columns with the logical
// types given, through arrow-go's low-level writer (its Arrow writer cannot
// annotate JSON or ENUM).
func writeTyped(t *testing.T, path string, cols []typedColumn) {
	t.Helper()
	var fields pqschema.FieldList
	for _, c := range cols {
		n, err := pqschema.NewPrimitiveNodeLogical(c.name, parquet.Repetitions.Required, c.logical, c.phys, c.typeLen, -1)
		if err != nil {
			t.Fatal(err)
		}
		fields = append(fields, n)
	}
	root, err := pqschema.NewGroupNode("schema", parquet.Repetitions.Required, fields, -1)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := file.NewParquetWriter(f, root)
	rg := w.AppendRowGroup()
	for _, c := range cols {
		cw, err := rg.NextColumn()
		if err != nil {
			t.Fatal(err)
		}
		switch v := c.values.(type) {
		case []parquet.ByteArray:
			_, err = cw.(*file.ByteArrayColumnChunkWriter).WriteBatch(v, nil, nil)
		case []parquet.FixedLenByteArray:
			_, err = cw.(*file.FixedLenByteArrayColumnChunkWriter).WriteBatch(v, nil, nil)
		case []int64:
			_, err = cw.(*file.Int64ColumnChunkWriter).WriteBatch(v, nil, nil)
		}
		if err != nil {
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

// TestCatTypes prints values of the types whose JSON form the mapping
// fixes, written as other tools write them.
func TestCatTypes(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "typed.parquet")
	uuid := parquet.FixedLenByteArray{0x55, 0x0e, 0x84, 0x00, 0xe2, 0x9b, 0x41, 0xd4, 0xa7, 0x16, 0x44, 0x66, 0x55, 0x44, 0x00, 0x00}
	writeTyped(t, p, []typedColumn{
		{"j", pqschema.JSONLogicalType{}, parquet.Types.ByteArray, -1, []parquet.ByteArray{parquet.ByteArray(`{"a": [1, 2]}`), parquet.ByteArray(`not json`)}},
		{"e", pqschema.EnumLogicalType{}, parquet.Types.ByteArray, -1, []parquet.ByteArray{parquet.ByteArray("red"), parquet.ByteArray("green")}},
		{"u", pqschema.UUIDLogicalType{}, parquet.Types.FixedLenByteArray, 16, []parquet.FixedLenByteArray{uuid, uuid}},
		{"d", pqschema.NewDecimalLogicalType(9, 2), parquet.Types.ByteArray, -1, []parquet.ByteArray{{0x00, 0x96}, {0xff, 0x6a}}},
		// 9999-12-31T23:59:59.5Z and 10000-01-01T00:00:00Z in microseconds.
		{"ts", pqschema.NewTimestampLogicalType(true, pqschema.TimeUnitMicros), parquet.Types.Int64, -1, []int64{253402300799500000, 253402300800000000}},
		{"local", pqschema.NewTimestampLogicalType(false, pqschema.TimeUnitNanos), parquet.Types.Int64, -1, []int64{1730982834123456789, 0}},
	})
	got := ok(t, "cat", p)
	want := `{"j":{"a":[1,2]},"e":"red","u":"550e8400-e29b-41d4-a716-446655440000","d":"1.50","ts":"9999-12-31T23:59:59.5Z","local":"2024-11-07T12:33:54.123456789"}` + "\n" +
		`{"j":"not json","e":"green","u":"550e8400-e29b-41d4-a716-446655440000","d":"-1.50","ts":"10000-01-01T00:00:00Z","local":"1970-01-01T00:00:00"}` + "\n"
	if got != want {
		t.Errorf("cat:\n%s\nwant\n%s", got, want)
	}
}

// A STRING that is not UTF-8 fails the read, naming where it is, unless
// --invalid-utf8 replace is given.
func TestCatInvalidUTF8(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "latin1.parquet")
	writeTyped(t, p, []typedColumn{
		{"s", pqschema.StringLogicalType{}, parquet.Types.ByteArray, -1, []parquet.ByteArray{parquet.ByteArray("ok"), parquet.ByteArray("caf\xe9")}},
	})
	r := fails(t, exitFailure, []string{"latin1.parquet", "row group 0", `column "s" row 1`, "not valid UTF-8"}, "cat", p)
	if !strings.HasPrefix(strings.TrimPrefix(r.stderr, "sluice: cat: "), "file://") {
		t.Errorf("the error does not lead with the file: %s", r.stderr)
	}
	if strings.Contains(r.stdout, "caf") {
		t.Errorf("the bad value was printed: %q", r.stdout)
	}
	if got := ok(t, "cat", p, "--invalid-utf8", "replace"); got != `{"s":"ok"}`+"\n"+`{"s":"caf`+"\uFFFD"+`"}`+"\n" {
		t.Errorf("--invalid-utf8 replace: %q", got)
	}
	fails(t, exitUsage, []string{"--invalid-utf8"}, "cat", p, "--invalid-utf8", "ignore")
}

// An empty file is a valid part of a dataset, and a dataset of nothing but
// empty files is an empty dataset: cat prints no rows and exits 0, saying
// why on stderr (it was refused, "dataset has no rows", exit 1).
func TestCatEmptyFile(t *testing.T) {
	dir := t.TempDir()
	col := func(vals ...int64) []typedColumn {
		return []typedColumn{{"x", pqschema.NewIntLogicalType(64, true), parquet.Types.Int64, -1, vals}}
	}
	writeTyped(t, filepath.Join(dir, "a-empty.parquet"), col())
	writeTyped(t, filepath.Join(dir, "b.parquet"), col(1, 2))
	if got := ok(t, "cat", dir); got != "{\"x\":1}\n{\"x\":2}\n" {
		t.Errorf("cat of an empty file and a full one: %q", got)
	}
	checkEmpty(t, filepath.Join(dir, "a-empty.parquet"))
}

// A VARIANT value that cannot be decoded is an error naming its file, row
// group and column, never text in its place.
func TestCatUndecodableVariant(t *testing.T) {
	p := filepath.Join(corpus.Dir(t), "parquet-testing", "shredded_variant", "case-040.parquet")
	if !fileExists(p) {
		t.Fatalf("%s not found", p)
	}
	r := fails(t, exitFailure, []string{"case-040.parquet", "row group 0", `column "var" row 0`, "VARIANT"}, "cat", p)
	if r.stdout != "" {
		t.Errorf("printed %q", r.stdout)
	}
}

// Top-level columns of one name read under the names DuckDB gives them (the
// later ones renamed "a_1" and so on), which --columns and --filter name.
func TestCatDuplicateColumns(t *testing.T) {
	p := filepath.Join(t.TempDir(), "dup.parquet")
	i64 := pqschema.NewIntLogicalType(64, true)
	writeTyped(t, p, []typedColumn{
		{"a", i64, parquet.Types.Int64, -1, []int64{1, 4}},
		{"a", i64, parquet.Types.Int64, -1, []int64{2, 5}},
		{"b", i64, parquet.Types.Int64, -1, []int64{3, 6}},
	})
	if got := ok(t, "cat", p); got != "{\"a\":1,\"a_1\":2,\"b\":3}\n{\"a\":4,\"a_1\":5,\"b\":6}\n" {
		t.Errorf("cat: %q", got)
	}
	if got := ok(t, "cat", p, "--columns", "a_1", "--filter", "a_1 = 5"); got != "{\"a_1\":5}\n" {
		t.Errorf("cat --columns a_1 --filter 'a_1 = 5': %q", got)
	}
	t.Run("duckdb", func(t *testing.T) {
		duckAgrees(t, "SELECT a_1::VARCHAR FROM read_parquet("+duckdb.Quote(p)+")", "2", "5")
	})
}

// A VARIANT whose metadata field is optional (arrow-go refuses the file)
// prints as DuckDB reads it.
func TestCatVariantOptionalMetadata(t *testing.T) {
	p := filepath.Join("..", "..", "formats", "parquet", "testdata", "variant_optional_metadata.parquet")
	if got := ok(t, "cat", p); got != "{\"id\":0,\"v\":42}\n{\"id\":1,\"v\":null}\n{\"id\":2,\"v\":7}\n" {
		t.Errorf("cat: %q", got)
	}
	t.Run("duckdb", func(t *testing.T) {
		duckAgrees(t, "SELECT coalesce(v::VARCHAR, 'null') FROM read_parquet("+duckdb.Quote(p)+") ORDER BY id", "42", "null", "7")
	})
}

// A byte-array DECIMAL holding an empty value (a zero some writers emit,
// which arrow-go refuses) reads as 0, as parquet-java and DuckDB read it; a
// value too wide for its Arrow decimal fails, naming the file, row group,
// column and row.
func TestCatByteArrayDecimal(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "dec.parquet")
	i64 := pqschema.NewIntLogicalType(64, true)
	dec := pqschema.NewDecimalLogicalType(9, 2)
	writeTyped(t, p, []typedColumn{
		{"a", i64, parquet.Types.Int64, -1, []int64{1, 2, 3, 4}},
		{"d", dec, parquet.Types.ByteArray, -1, []parquet.ByteArray{{}, {0x01}, {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x85}, {0xff, 0x85}}},
	})
	want := "{\"a\":1,\"d\":\"0.00\"}\n{\"a\":2,\"d\":\"0.01\"}\n{\"a\":3,\"d\":\"-1.23\"}\n{\"a\":4,\"d\":\"-1.23\"}\n"
	if got := ok(t, "cat", p); got != want {
		t.Errorf("cat: %q, want %q", got, want)
	}
	t.Run("duckdb", func(t *testing.T) {
		duckAgrees(t, "SELECT d::VARCHAR FROM read_parquet("+duckdb.Quote(p)+")", "0.00", "0.01", "-1.23", "-1.23")
	})
	wide := filepath.Join(dir, "wide.parquet")
	writeTyped(t, wide, []typedColumn{
		{"a", i64, parquet.Types.Int64, -1, []int64{1, 2}},
		{"d", dec, parquet.Types.ByteArray, -1, []parquet.ByteArray{{0x01}, {0x01, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}}},
	})
	r := fails(t, exitFailure, []string{"wide.parquet", "row group 0", `column "d" row 1`, "does not fit"}, "cat", wide)
	if i, j := strings.Index(r.stderr, "wide.parquet"), strings.Index(r.stderr, "epoch"); i < 0 || j >= 0 && j < i {
		t.Errorf("the iteration context comes before the file: %s", r.stderr)
	}
}

// duckAgrees checks that DuckDB's answer to sql, one column of text, is want.
func duckAgrees(t *testing.T, sql string, want ...string) {
	t.Helper()
	db := duckdb.ForTest(t)
	res, err := db.Query(sql)
	if err != nil {
		t.Fatal(err)
	}
	if res.Error != "" {
		t.Fatalf("DuckDB: %s", res.Error)
	}
	var got []string
	for _, row := range res.Rows {
		got = append(got, fmt.Sprint(row[0]))
	}
	if !slices.Equal(got, want) {
		t.Errorf("DuckDB reads %q, sluice %q", got, want)
	}
}

// FIXED_LEN_BYTE_ARRAY columns in DELTA_BYTE_ARRAY encoding (written by
// arrow-rs; arrow-go has no decoder for them) print as DuckDB reads them.
func TestCatFixedLenDeltaByteArray(t *testing.T) {
	p := filepath.Join("..", "..", "formats", "parquet", "testdata", "flba_delta_byte_array.parquet")
	var rows []string
	for _, line := range strings.Split(strings.TrimSpace(ok(t, "cat", p)), "\n") {
		var raw map[string]any
		if err := json.Unmarshal([]byte(line), &raw); err != nil {
			t.Fatal(err)
		}
		rows = append(rows, fmt.Sprintf("%v:%v:%v", raw["id"], raw["u"], raw["f"]))
	}
	if len(rows) != 300 {
		t.Fatalf("%d rows", len(rows))
	}
	// A null prints as JSON null, which %v above writes as <nil>.
	duckAgrees(t, "SELECT id || ':' || coalesce(to_base64(u), '<nil>') || ':' || to_base64(f) FROM read_parquet("+duckdb.Quote(p)+") ORDER BY id", rows...)
}

// INT96 timestamps read in microseconds, every year Spark writes; --int96 ns
// reads arrow-go's nanoseconds, which cannot hold them.
func TestCatInt96(t *testing.T) {
	p := filepath.Join(corpus.Dir(t), "parquet-testing", "data", "int96_from_spark.parquet")
	if _, err := os.Stat(p); err != nil {
		t.Fatal(err)
	}
	got := ok(t, "cat", p)
	want := `{"a":"2024-01-01T20:34:56.123456Z"}
{"a":"2024-01-01T01:00:00Z"}
{"a":"9999-12-31T03:00:00Z"}
{"a":"2024-12-30T23:00:00Z"}
{"a":null}
{"a":"290000-12-30T23:00:00Z"}
`
	if got != want {
		t.Errorf("cat: %q, want %q", got, want)
	}
	fails(t, exitFailure, []string{"int96_from_spark.parquet", `column "a"`, "INT96"}, "cat", p, "--int96", "ns")
	fails(t, exitUsage, []string{"--int96"}, "cat", p, "--int96", "ms")
}

// --invalid-utf8 replace governs CSV values and header names alike.
func TestCatInvalidUTF8CSV(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "latin1.csv")
	if err := os.WriteFile(p, []byte("a,caf\xe9\n1,x\xe9\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fails(t, exitFailure, []string{"latin1.csv", "column 2 of 2", "--invalid-utf8 replace"}, "cat", "--no-progress", p)
	if got, want := ok(t, "cat", "--no-progress", "--invalid-utf8", "replace", p), `{"a":1,"caf`+"\uFFFD"+`":"x`+"\uFFFD"+`"}`+"\n"; got != want {
		t.Errorf("--invalid-utf8 replace: %q, want %q", got, want)
	}
}
