package parquet_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/extensions"
	"github.com/apache/arrow-go/v18/arrow/memory"
	pq "github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/sluicedata/sluice/formats"
	"github.com/sluicedata/sluice/formats/parquet"
	"github.com/sluicedata/sluice/internal/testkit/corpus"
	"github.com/sluicedata/sluice/internal/testkit/duckdb"
)

// readFile reads every row of the local Parquet file at path, one array per
// column, and checks that no Arrow memory is left outstanding afterwards
// (unless the file is DELTA encoded: see usesDelta).
func readFile(t *testing.T, path string) (*formats.Scan, []arrow.Array) {
	t.Helper()
	ctx := context.Background()
	ds, err := planParquet(ctx, []string{path}, formats.PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ds.Close() })
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	if len(ds.Fragments) != 1 {
		t.Fatalf("%d fragments", len(ds.Fragments))
	}
	cols, err := readColumns(ctx, ds, 0, 0, ds.Fragments[0].Rows, mem)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		release(cols)
		if n := mem.CurrentAlloc(); n != 0 && !usesDelta(t, path) {
			t.Errorf("%d bytes of Arrow memory outstanding", n)
		}
	})
	return ds, cols
}

// A DATA_PAGE_V2 of nulls only whose empty values section is stored as zero
// bytes under Snappy: arrow-go's Snappy refuses the empty block.
func TestEmptySnappyPage(t *testing.T) {
	sharedTestdata := corpus.Dir(t)
	_, cols := readFile(t, filepath.Join(sharedTestdata, "parquet-testing/data/datapage_v2_empty_datapage.snappy.parquet"))
	if len(cols) != 1 || cols[0].Len() != 1 || cols[0].NullN() != 1 {
		t.Fatalf("want one null row, got %v", cols)
	}
	// Only the empty block is read differently: damaged blocks still fail.
	c, err := compress.GetCodec(compress.Codecs.Snappy)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := compress.Decode(c, nil, nil); err != nil || len(out) != 0 {
		t.Errorf("empty block: %q, %v", out, err)
	}
	if _, err := compress.Decode(c, nil, []byte{0x05, 0xff}); err == nil {
		t.Error("a damaged block decoded")
	}
	enc := c.Encode(nil, []byte("sluice"))
	if out, err := compress.Decode(c, nil, enc); err != nil || string(out) != "sluice" {
		t.Errorf("round trip: %q, %v", out, err)
	}
}

// Spark writes INT96 timestamps past 2262 that arrow-go cannot hold in
// nanoseconds; the driver reads INT96 as microseconds. The expected values
// are the file's README's (parquet-testing/data/int96_from_spark.md).
func TestInt96FromSpark(t *testing.T) {
	sharedTestdata := corpus.Dir(t)
	path := filepath.Join(sharedTestdata, "parquet-testing/data/int96_from_spark.parquet")
	ds, cols := readFile(t, path)
	want := &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}
	if !arrow.TypeEqual(ds.Schema.Field(0).Type, want) {
		t.Fatalf("type %s, want %s", ds.Schema.Field(0).Type, want)
	}
	ts := cols[0].(*array.Timestamp)
	micros := []int64{1704141296123456, 1704070800000000, 253402225200000000, 1735599600000000, 0, 9089380393200000000}
	if ts.Len() != len(micros) {
		t.Fatalf("%d rows", ts.Len())
	}
	for i, us := range micros {
		if i == 4 {
			if !ts.IsNull(i) {
				t.Errorf("row 4: %d, want null", ts.Value(i))
			}
			continue
		}
		if got := int64(ts.Value(i)); got != us {
			t.Errorf("row %d: %d, want %d", i, got, us)
		}
	}
	// arrow-go's own reading, on request, still refuses the years it
	// cannot hold, naming the file and column.
	err := planAndRead(t, path, parquet.Format{INT96: parquet.INT96Nanoseconds})
	if err == nil || !strings.Contains(err.Error(), "int96_from_spark.parquet") || !strings.Contains(err.Error(), `column "a"`) {
		t.Errorf("INT96Nanoseconds: %v", err)
	}
}

// planAndRead reads every row of the file at path with format.
func planAndRead(t *testing.T, path string, format parquet.Format) error {
	t.Helper()
	ctx := context.Background()
	ds, err := formats.Plan(ctx, []string{path}, formats.PlanOptions{Formats: []formats.Format{format}})
	if err != nil {
		return err
	}
	defer ds.Close()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	cols, err := readColumns(ctx, ds, 0, 0, ds.Fragments[0].Rows, mem)
	release(cols)
	return err
}

// INT96 with digits below the microsecond (Impala writes them) is refused
// under the default, naming the row, and read in full as nanoseconds.
func TestInt96Nanoseconds(t *testing.T) {
	path := filepath.Join(t.TempDir(), "impala.parquet")
	mem := memory.NewGoAllocator()
	b := array.NewTimestampBuilder(mem, &arrow.TimestampType{Unit: arrow.Nanosecond, TimeZone: "UTC"})
	b.Append(1_000_000_000)
	b.AppendNull()
	b.Append(1_000_000_001)
	col := b.NewArray()
	b.Release()
	defer col.Release()
	schema := arrow.NewSchema([]arrow.Field{{Name: "ts", Type: col.DataType(), Nullable: true}}, nil)
	rec := array.NewRecordBatch(schema, []arrow.Array{col}, int64(col.Len()))
	defer rec.Release()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w, err := pqarrow.NewFileWriter(schema, f, pq.NewWriterProperties(), pqarrow.NewArrowWriterProperties(pqarrow.WithDeprecatedInt96Timestamps(true), pqarrow.WithStoreSchema()))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if footer(t, path).Schema.Column(0).PhysicalType() != pq.Types.Int96 {
		t.Fatal("not written as INT96")
	}
	err = planAndRead(t, path, parquet.Format{})
	if err == nil || !strings.Contains(err.Error(), `column "ts" row 2`) || !strings.Contains(err.Error(), "INT96Nanoseconds") {
		t.Errorf("default: %v", err)
	}
	ctx := context.Background()
	ds, err := formats.Plan(ctx, []string{path}, formats.PlanOptions{Formats: []formats.Format{parquet.Format{INT96: parquet.INT96Nanoseconds}}})
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	cmem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer cmem.AssertSize(t, 0)
	cols, err := readColumns(ctx, ds, 0, 0, 3, cmem)
	if err != nil {
		t.Fatal(err)
	}
	defer release(cols)
	if ts := cols[0].(*array.Timestamp); ts.Value(0) != 1_000_000_000 || !ts.IsNull(1) || ts.Value(2) != 1_000_000_001 {
		t.Errorf("nanoseconds: %v", ts)
	}
}

// flbaDeltaFile holds FIXED_LEN_BYTE_ARRAY(16) and (3) columns in
// DELTA_BYTE_ARRAY encoding, written by arrow-rs (testdata/*.mjs writes it):
// arrow-go has no decoder for that pair and panics.
const flbaDeltaFile = "testdata/flba_delta_byte_array.parquet"

// flbaDeltaRow is row i of flbaDeltaFile as its writer made it (nil: null).
func flbaDeltaRow(i int) (u, f []byte) {
	f = []byte{byte(i), byte(i >> 8), 7}
	if i%7 == 3 {
		return nil, f
	}
	u = make([]byte, 16)
	for j := range u {
		if j < i%17 {
			u[j] = 0x55
		} else {
			u[j] = byte(i*31 + j*17)
		}
	}
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	return u, f
}

func TestFixedLenDeltaByteArray(t *testing.T) {
	before := parquet.FastChunks()
	ds, cols := readFile(t, flbaDeltaFile)
	// The own decoder reads every chunk of the file's two row groups,
	// FIXED_LEN_BYTE_ARRAY in DELTA_BYTE_ARRAY included.
	if took := parquet.FastChunks() - before; took != 6 {
		t.Errorf("the own decoder took %d chunks of 6", took)
	}
	for i, want := range []arrow.DataType{arrow.PrimitiveTypes.Int32, &arrow.FixedSizeBinaryType{ByteWidth: 16}, &arrow.FixedSizeBinaryType{ByteWidth: 3}} {
		if got := ds.Schema.Field(i).Type; !arrow.TypeEqual(got, want) {
			t.Fatalf("column %d: %s, want %s", i, got, want)
		}
	}
	if len(cols) != 3 || cols[0].Len() != 300 {
		t.Fatalf("%d columns, %d rows", len(cols), cols[0].Len())
	}
	ids := cols[0].(*array.Int32)
	us, fs := cols[1].(*array.FixedSizeBinary), cols[2].(*array.FixedSizeBinary)
	for i := range 300 {
		u, f := flbaDeltaRow(int(ids.Value(i)))
		if u == nil != us.IsNull(i) || u != nil && string(us.Value(i)) != string(u) {
			t.Fatalf("row %d: u %x, want %x", i, us.Value(i), u)
		}
		if string(fs.Value(i)) != string(f) {
			t.Fatalf("row %d: f %x, want %x", i, fs.Value(i), f)
		}
	}
	// Reads of part of a row group, and of the row groups one by one, give
	// the same rows (readAll compares the middle third with the whole).
	if _, leaked, err := readAll(context.Background(), flbaDeltaFile); err != nil || leaked != 0 && !usesDelta(t, flbaDeltaFile) {
		t.Fatalf("readAll: %v, %d bytes left", err, leaked)
	}
}

// A logical type newer than arrow-go (here an id no version defines) reads
// as the column's physical type, as the spec asks; arrow-go panics on the
// whole file.
func TestUnknownLogicalType(t *testing.T) {
	sharedTestdata := corpus.Dir(t)
	ds, cols := readFile(t, filepath.Join(sharedTestdata, "parquet-testing/data/unknown-logical-type.parquet"))
	if got := ds.Schema.Field(1).Type; !arrow.TypeEqual(got, arrow.BinaryTypes.Binary) {
		t.Fatalf("type %s, want binary", got)
	}
	if got := ds.Schema.Field(0).Type; !arrow.TypeEqual(got, arrow.BinaryTypes.String) {
		t.Fatalf("the known column: %s, want a string", got)
	}
	known, unknown := cols[0].(*array.String), cols[1].(*array.Binary)
	for i := range 3 {
		n := string(rune('1' + i))
		if known.Value(i) != "known string "+n || string(unknown.Value(i)) != "unknown string "+n {
			t.Errorf("row %d: %q, %q", i, known.Value(i), unknown.Value(i))
		}
	}
}

// A failure arrow-go reports without naming the column is reported with
// the column that fails when decoded alone (see guardRowGroup).
func TestFailingColumnNamed(t *testing.T) {
	sharedTestdata := corpus.Dir(t)
	path := filepath.Join(sharedTestdata, "parquet-testing/bad_data/ARROW-GH-45185.parquet")
	err := planAndRead(t, path, parquet.Format{})
	if err == nil || !strings.Contains(err.Error(), "ARROW-GH-45185.parquet") || !strings.Contains(err.Error(), `row group 0: column "x.list.element"`) {
		t.Errorf("got %v", err)
	}
}

// flbaDeltaNestedFile holds FIXED_LEN_BYTE_ARRAY(16) columns in
// DELTA_BYTE_ARRAY encoding inside a struct (s.u) and a list
// (l.list.element), written by arrow-rs (testdata/*.mjs writes it).
const flbaDeltaNestedFile = "testdata/flba_delta_byte_array_nested.parquet"

// withUUID copies the Parquet file src to dst with the UUID logical type
// on its FIXED_LEN_BYTE_ARRAY(16) column "u" (arrow-rs, through
// parquet-wasm, does not write it): in the footer, the element's bytes end
// with its name and a stop byte, before which the logicalType field (id 10,
// UUID: union field 14, an empty struct) goes. The column chunks are before
// the footer, so only its length moves.
func withUUID(t testing.TB, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	n := int(binary.LittleEndian.Uint32(b[len(b)-8:]))
	footer := b[len(b)-8-n : len(b)-8]
	elem := []byte{0x15, 0x0e, 0x15, 0x20, 0x15, 0x02, 0x18, 0x01, 'u', 0x00} // FLBA(16), optional, "u", stop
	i := bytes.Index(footer, elem)
	if i < 0 || bytes.Count(footer, elem) != 1 {
		t.Fatalf("%s: the element of u is not as expected", src)
	}
	i += len(elem) - 1
	out := append([]byte{}, b[:len(b)-8-n]...)
	out = append(out, footer[:i]...)
	out = append(out, 0x6c, 0xec, 0x00, 0x00) // logicalType {UUID {}}
	out = append(out, footer[i:]...)
	out = binary.LittleEndian.AppendUint32(out, uint32(n+4))
	out = append(out, "PAR1"...)
	if err := os.WriteFile(dst, out, 0o644); err != nil {
		t.Fatal(err)
	}
}

// A UUID column in DELTA_BYTE_ARRAY reads as arrow.uuid with the values
// written, as DuckDB reads them.
func TestFixedLenDeltaByteArrayUUID(t *testing.T) {
	path := filepath.Join(t.TempDir(), "uuid.parquet")
	withUUID(t, flbaDeltaFile, path)
	ds, cols := readFile(t, path)
	if got := ds.Schema.Field(1).Type; !arrow.TypeEqual(got, extensions.NewUUIDType()) {
		t.Fatalf("u read as %s", got)
	}
	ids, us := cols[0].(*array.Int32), cols[1].(*extensions.UUIDArray)
	got := make([]string, us.Len())
	for i := range us.Len() {
		u, _ := flbaDeltaRow(int(ids.Value(i)))
		if u == nil != us.IsNull(i) {
			t.Fatalf("row %d: null %v", i, us.IsNull(i))
		}
		if u != nil {
			v := us.Value(i)
			if string(v[:]) != string(u) {
				t.Fatalf("row %d: %x, want %x", i, v, u)
			}
			got[i] = v.String()
		}
	}
	checkDuckUUIDs(t, path, got)
}

// checkDuckUUIDs checks that DuckDB reads the column u of path, ordered by
// id, as UUIDs that are got as text ("" for a null).
func checkDuckUUIDs(t *testing.T, path string, got []string) {
	t.Helper()
	db := duckdb.ForTest(t)
	res, err := db.Query("SELECT typeof(u), u::VARCHAR FROM " + duckdb.Quote(path) + " ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rows) != len(got) {
		t.Fatalf("DuckDB: %d rows, sluice %d", len(res.Rows), len(got))
	}
	for i, r := range res.Rows {
		s, _ := r[1].(string)
		if r[0] != "UUID" || s != got[i] {
			t.Fatalf("row %d: DuckDB %v, sluice %q", i, r, got[i])
		}
	}
}

// Inside a struct or a list, where the driver cannot hand the column to
// arrow-go as BYTE_ARRAY, the file is refused at plan time naming the
// column, the encoding and arrow-go's limitation, UUID or not; DuckDB reads
// it (so the file is not the fault).
func TestFixedLenDeltaByteArrayNested(t *testing.T) {
	uuid := filepath.Join(t.TempDir(), "nested_uuid.parquet")
	withUUID(t, flbaDeltaNestedFile, uuid)
	for _, path := range []string{flbaDeltaNestedFile, uuid} {
		_, err := planParquet(context.Background(), []string{path}, formats.PlanOptions{})
		if err == nil || !strings.Contains(err.Error(), filepath.Base(path)) ||
			!strings.Contains(err.Error(), `column "s.u" is FIXED_LEN_BYTE_ARRAY(16) in DELTA_BYTE_ARRAY encoding, which arrow-go cannot decode`) {
			t.Errorf("%s: %v", path, err)
		}
	}
	db := duckdb.ForTest(t)
	res, err := db.Query("SELECT typeof(s), count(*), count(s.u), sum(len(l)) FROM " + duckdb.Quote(uuid) + " GROUP BY ALL")
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rows) != 1 || res.Rows[0][0] != "STRUCT(u UUID)" {
		t.Errorf("DuckDB: %v", res.Rows)
	}
}
