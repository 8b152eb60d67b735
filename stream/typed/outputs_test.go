package typed_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/float16"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/sluicedata/sluice/internal/testkit/synth"
	"github.com/sluicedata/sluice/stream"
	"github.com/sluicedata/sluice/stream/typed"
)

// ---- a dataset of the types synth lacks ----

// outTypedSchema holds every type the outputs convert that Parquet stores,
// with nulls in the n* columns.
var outTypedSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "i8", Type: arrow.PrimitiveTypes.Int8},
	{Name: "i16", Type: arrow.PrimitiveTypes.Int16},
	{Name: "i32", Type: arrow.PrimitiveTypes.Int32},
	{Name: "u8", Type: arrow.PrimitiveTypes.Uint8},
	{Name: "u16", Type: arrow.PrimitiveTypes.Uint16},
	{Name: "u32", Type: arrow.PrimitiveTypes.Uint32},
	{Name: "u64", Type: arrow.PrimitiveTypes.Uint64},
	{Name: "f32", Type: arrow.PrimitiveTypes.Float32},
	{Name: "f64", Type: arrow.PrimitiveTypes.Float64},
	{Name: "flag", Type: arrow.FixedWidthTypes.Boolean},
	{Name: "name", Type: arrow.BinaryTypes.String},
	{Name: "blob", Type: arrow.BinaryTypes.Binary},
	{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}},
	{Name: "tsny", Type: &arrow.TimestampType{Unit: arrow.Millisecond, TimeZone: "America/New_York"}},
	{Name: "tsn", Type: &arrow.TimestampType{Unit: arrow.Nanosecond}},
	{Name: "day", Type: arrow.FixedWidthTypes.Date32},
	{Name: "ni", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	{Name: "ns", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "nts", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, Nullable: true},
	{Name: "nb", Type: arrow.BinaryTypes.Binary, Nullable: true},
}, nil)

// outTyped is a row of outTypedSchema as Structs decodes it, with
// widening conversions, an untagged field, an embedded struct, pointers for
// nulls, and fields that are skipped.
type outTyped struct {
	ID   int64  `sluice:"id"`
	I8   int8   // untagged: the column "i8", found ignoring case
	I16  int32  `sluice:"i16"`
	I32  int64  `sluice:"i32"`
	U8   int16  `sluice:"u8"`
	U16  uint16 `sluice:"u16"`
	U32  uint64 `sluice:"u32"`
	U64  uint64 `sluice:"u64"`
	F32  float64
	F64  float64 `sluice:"f64"`
	Flag bool
	outTypedText
	TS   time.Time  `sluice:"ts"`
	TSNY time.Time  `sluice:"tsny"`
	TSN  time.Time  `sluice:"tsn"`
	Day  time.Time  `sluice:"day"`
	NI   *int64     `sluice:"ni"`
	NS   *string    `sluice:"ns"`
	NTS  *time.Time `sluice:"nts"`
	NB   []byte     `sluice:"nb"`

	Note   string `sluice:"-"`
	hidden int
}

type outTypedText struct {
	Name string `sluice:"name"`
	Blob []byte `sluice:"blob"`
}

var outNY = func() *time.Location {
	loc, err := time.LoadLocation("America/New_York")
	if err != nil {
		panic(err)
	}
	return loc
}()

// outWant is row id of the typed dataset.
func outWant(id int64) outTyped {
	w := outTyped{
		ID:   id,
		I8:   int8(id * 37),
		I16:  int32(int16(id * -1237)),
		I32:  int64(int32(id * -1234567)),
		U8:   int16(uint8(id * 13)),
		U16:  uint16(id * 4099),
		U32:  uint64(uint32(id * 2654435761)),
		U64:  uint64(id) * 0x9e3779b97f4a7c15,
		F32:  float64(float32(id) / 3),
		F64:  float64(id)*1.5 - 1e6 + 1.0/7,
		Flag: id%2 == 0,
		outTypedText: outTypedText{
			Name: strings.Repeat("é", int(id%4)) + fmt.Sprint(id),
			Blob: []byte{},
		},
		TS:   time.UnixMicro(1_700_000_000_000_000 + id*1_000_003).UTC(),
		TSNY: time.UnixMilli(1_700_000_000_000 + id*86_399_999).In(outNY),
		TSN:  time.Unix(0, 1_700_000_000_000_000_000+id*999).UTC(),
		Day:  time.Unix((18000+id)*86400, 0).UTC(),
	}
	if id%7 == 0 {
		w.Name = ""
	}
	if id%6 != 0 {
		w.Blob = []byte{byte(id), byte(id >> 8), 0}
	}
	if id%3 != 2 {
		v := id * 11
		w.NI = &v
	}
	if id%5 != 4 {
		v := fmt.Sprintf("s%d", id)
		w.NS = &v
	}
	if id%4 != 1 {
		v := time.UnixMicro(id * 1_000_000_007).UTC()
		w.NTS = &v
	}
	if id%2 == 0 {
		w.NB = []byte{byte(id)}
	}
	return w
}

// outTypedRecord builds rows [first, first+n) of the typed dataset.
func outTypedRecord(mem memory.Allocator, first, n int64) arrow.RecordBatch {
	b := array.NewRecordBuilder(mem, outTypedSchema)
	defer b.Release()
	for id := first; id < first+n; id++ {
		w := outWant(id)
		b.Field(0).(*array.Int64Builder).Append(w.ID)
		b.Field(1).(*array.Int8Builder).Append(w.I8)
		b.Field(2).(*array.Int16Builder).Append(int16(w.I16))
		b.Field(3).(*array.Int32Builder).Append(int32(w.I32))
		b.Field(4).(*array.Uint8Builder).Append(uint8(w.U8))
		b.Field(5).(*array.Uint16Builder).Append(w.U16)
		b.Field(6).(*array.Uint32Builder).Append(uint32(w.U32))
		b.Field(7).(*array.Uint64Builder).Append(w.U64)
		b.Field(8).(*array.Float32Builder).Append(float32(w.F32))
		b.Field(9).(*array.Float64Builder).Append(w.F64)
		b.Field(10).(*array.BooleanBuilder).Append(w.Flag)
		b.Field(11).(*array.StringBuilder).Append(w.Name)
		b.Field(12).(*array.BinaryBuilder).Append(w.Blob)
		b.Field(13).(*array.TimestampBuilder).Append(arrow.Timestamp(w.TS.UnixMicro()))
		b.Field(14).(*array.TimestampBuilder).Append(arrow.Timestamp(w.TSNY.UnixMilli()))
		b.Field(15).(*array.TimestampBuilder).Append(arrow.Timestamp(w.TSN.UnixNano()))
		b.Field(16).(*array.Date32Builder).Append(arrow.Date32(18000 + id))
		if w.NI != nil {
			b.Field(17).(*array.Int64Builder).Append(*w.NI)
		} else {
			b.Field(17).AppendNull()
		}
		if w.NS != nil {
			b.Field(18).(*array.StringBuilder).Append(*w.NS)
		} else {
			b.Field(18).AppendNull()
		}
		if w.NTS != nil {
			b.Field(19).(*array.TimestampBuilder).Append(arrow.Timestamp(w.NTS.UnixMicro()))
		} else {
			b.Field(19).AppendNull()
		}
		if w.NB != nil {
			b.Field(20).(*array.BinaryBuilder).Append(w.NB)
		} else {
			b.Field(20).AppendNull()
		}
	}
	return b.NewRecordBatch()
}

// outWriteParquet writes recs as one Parquet file with the Arrow schema
// stored, so that the types read back are the types written.
func outWriteParquet(t testing.TB, path string, rowGroupRows int64, recs ...arrow.RecordBatch) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w, err := pqarrow.NewFileWriter(recs[0].Schema(), f,
		parquet.NewWriterProperties(parquet.WithMaxRowGroupLength(rowGroupRows)),
		pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema()))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if err := w.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil { // closes f
		t.Fatal(err)
	}
}

const (
	outTypedFiles   = 3
	outTypedPerFile = 400
)

// outWriteTyped writes the typed dataset: 3 files of 400 rows in row groups
// of 128, so that batches of 100 cross row groups and files.
func outWriteTyped(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	for i := range outTypedFiles {
		rec := outTypedRecord(memory.DefaultAllocator, int64(i*outTypedPerFile), outTypedPerFile)
		outWriteParquet(t, filepath.Join(dir, fmt.Sprintf("typed-%d.parquet", i)), 128, rec)
		rec.Release()
	}
	return dir
}

// poisonAllocator overwrites memory as it is freed, so that an output that
// aliased an Arrow buffer reads garbage once its batch is released.
type poisonAllocator struct{ memory.Allocator }

func (p poisonAllocator) Free(b []byte) {
	for i := range b {
		b[i] = 0xa5
	}
	p.Allocator.Free(b)
}

// outOptions are options over dir with a poisoning, checked allocator that
// must be empty when the test ends (after the dataset is closed).
func outOptions(t testing.TB, dir string) stream.Options {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	t.Cleanup(func() { mem.AssertSize(t, 0) })
	return stream.Options{
		URLs:          []string{dir},
		BatchSize:     100,
		ShuffleWindow: 500,
		Seed:          3,
		Limits:        stream.Limits{TransformConcurrency: 3},
		Allocator:     poisonAllocator{mem},
	}
}

func outOpen(t testing.TB, o stream.Options) *stream.Dataset {
	t.Helper()
	ds, err := stream.Open(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ds.Close() }) // runs before the allocator check
	return ds
}

// outCheckRow compares a decoded row with the one written; times must be
// the same instant in the same zone.
func outCheckRow(t testing.TB, got outTyped) {
	t.Helper()
	want := outWant(got.ID)
	times := func(name string, g, w time.Time) {
		t.Helper()
		if !g.Equal(w) || g.Location().String() != w.Location().String() {
			t.Fatalf("id %d: %s = %v, want %v", got.ID, name, g, w)
		}
	}
	times("TS", got.TS, want.TS)
	times("TSNY", got.TSNY, want.TSNY)
	times("TSN", got.TSN, want.TSN)
	times("Day", got.Day, want.Day)
	if (got.NTS == nil) != (want.NTS == nil) {
		t.Fatalf("id %d: NTS = %v, want %v", got.ID, got.NTS, want.NTS)
	}
	if got.NTS != nil {
		times("NTS", *got.NTS, *want.NTS)
	}
	got.TS, got.TSNY, got.TSN, got.Day, got.NTS = time.Time{}, time.Time{}, time.Time{}, time.Time{}, nil
	want.TS, want.TSNY, want.TSN, want.Day, want.NTS = time.Time{}, time.Time{}, time.Time{}, time.Time{}, nil
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("id %d:\n got %+v\nwant %+v", got.ID, got, want)
	}
	// A null []byte is nil, an empty one is not.
	if (got.NB == nil) != (want.NB == nil) || (got.Blob == nil) != (want.Blob == nil) {
		t.Fatalf("id %d: nil-ness of NB (%v) or Blob (%v) differs", got.ID, got.NB, got.Blob)
	}
}

// ---- Structs ----

// Every type converts exactly, nulls reach pointers as nil, and nothing
// aliases Arrow memory: rows are checked after every batch was released
// (and poisoned).
func TestStructsValues(t *testing.T) {
	dir := outWriteTyped(t)
	for _, shuffle := range []bool{false, true} {
		t.Run(fmt.Sprintf("shuffle=%t", shuffle), func(t *testing.T) {
			o := outOptions(t, dir)
			o.Shuffle, o.NumSplits = shuffle, 2
			ds := outOpen(t, o)
			var all []outTyped
			for rows, err := range typed.Structs[outTyped](context.Background(), ds) {
				if err != nil {
					t.Fatal(err)
				}
				all = append(all, rows...)
			}
			if len(all) != outTypedFiles*outTypedPerFile {
				t.Fatalf("got %d rows, want %d", len(all), outTypedFiles*outTypedPerFile)
			}
			ids := make([]int64, len(all))
			for i, r := range all {
				outCheckRow(t, r)
				ids[i] = r.ID
			}
			outExactlyOnce(t, ids, outTypedFiles*outTypedPerFile)
		})
	}
}

// outExactlyOnce checks that ids hold every id of [0, n) once.
func outExactlyOnce(t testing.TB, ids []int64, n int) {
	t.Helper()
	seen := make([]int, n)
	for _, id := range ids {
		if id < 0 || id >= int64(n) {
			t.Fatalf("id %d outside [0, %d)", id, n)
		}
		seen[id]++
	}
	for id, c := range seen {
		if c != 1 {
			t.Fatalf("id %d delivered %d times", id, c)
		}
	}
}

// outSynthRow is a row of a synth dataset.
type outSynthRow struct {
	ID    int64 `sluice:"id"`
	Label int64
	X     float64 `sluice:"x"`
	S     string  `sluice:"s"`
}

// outBatchRows is what Batches yields, copied out.
func outBatchRows(t testing.TB, ds typed.Source) [][]outSynthRow {
	t.Helper()
	var out [][]outSynthRow
	for b, err := range ds.Batches(context.Background()) {
		if err != nil {
			t.Fatal(err)
		}
		ids := b.Column(0).(*array.Int64)
		labels := b.Column(1).(*array.Int64)
		xs := b.Column(2).(*array.Float64)
		ss := b.Column(3).(*array.String)
		rows := make([]outSynthRow, b.NumRows())
		for r := range rows {
			rows[r] = outSynthRow{ids.Value(r), labels.Value(r), xs.Value(r), strings.Clone(ss.Value(r))}
		}
		out = append(out, rows)
	}
	return out
}

var outSynthSpec = synth.Spec{Files: 4, RowsPerFile: 1500, RowGroupRows: 200, Seed: 11}

// Structs, Rows and Matrices yield the batches of Batches, in its order,
// with its values: shuffled, several splits, parallel transforms.
func TestOutputsOrderEqualsBatches(t *testing.T) {
	dir := t.TempDir()
	if err := synth.WriteDir(dir, outSynthSpec); err != nil {
		t.Fatal(err)
	}
	opts := func() stream.Options {
		o := outOptions(t, dir)
		o.Shuffle, o.NumSplits, o.ClumpSize = true, 4, 3
		return o
	}
	want := outBatchRows(t, outOpen(t, opts()))
	if len(want) < 10 {
		t.Fatalf("only %d batches", len(want))
	}
	ctx := context.Background()

	var got [][]outSynthRow
	for rows, err := range typed.Structs[outSynthRow](ctx, outOpen(t, opts())) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, rows)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Structs differs from Batches (%d and %d batches)", len(got), len(want))
	}

	i := 0
	for rows, err := range typed.Rows(ctx, outOpen(t, opts())) {
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) != len(want[i]) {
			t.Fatalf("Rows batch %d has %d rows, want %d", i, len(rows), len(want[i]))
		}
		for r, m := range rows {
			w := want[i][r]
			if len(m) != 4 || m["id"] != w.ID || m["label"] != w.Label || m["x"] != w.X || m["s"] != w.S {
				t.Fatalf("Rows batch %d row %d = %v, want %+v", i, r, m, w)
			}
		}
		i++
	}
	if i != len(want) {
		t.Fatalf("Rows yielded %d batches, want %d", i, len(want))
	}

	i = 0
	for m, err := range typed.Matrices(ctx, outOpen(t, opts()), []string{"x", "id", "label"}) {
		if err != nil {
			t.Fatal(err)
		}
		if m.Rows != len(want[i]) || len(m.Data) != 3*m.Rows || !slices.Equal(m.Columns, []string{"x", "id", "label"}) {
			t.Fatalf("Matrices batch %d: %d rows, %d values, columns %v", i, m.Rows, len(m.Data), m.Columns)
		}
		for r, w := range want[i] {
			if row := m.Row(r); row[0] != float32(w.X) || row[1] != float32(w.ID) || row[2] != float32(w.Label) {
				t.Fatalf("Matrices batch %d row %d = %v, want %+v", i, r, row, w)
			}
		}
		i++
	}
	if i != len(want) {
		t.Fatalf("Matrices yielded %d batches, want %d", i, len(want))
	}
}

// Shuffled over several splits and ranks, Structs covers every id once.
func TestStructsExactlyOnceAcrossRanks(t *testing.T) {
	dir := t.TempDir()
	if err := synth.WriteDir(dir, outSynthSpec); err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for rank := range 2 {
		o := outOptions(t, dir)
		o.Shuffle, o.NumSplits, o.WorldSize, o.Rank = true, 4, 2, rank
		var mine []int64
		for rows, err := range typed.Structs[outSynthRow](context.Background(), outOpen(t, o)) {
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range rows {
				mine = append(mine, r.ID)
			}
		}
		if slices.IsSorted(mine) {
			t.Fatalf("rank %d: shuffled ids came sorted", rank)
		}
		ids = append(ids, mine...)
	}
	outExactlyOnce(t, ids, int(outSynthSpec.Rows()))
}

// Breaking out keeps the position, like Batches: the next iteration goes on
// with the next batch, and nothing is leaked.
func TestStructsBreakKeepsPosition(t *testing.T) {
	dir := t.TempDir()
	if err := synth.WriteDir(dir, outSynthSpec); err != nil {
		t.Fatal(err)
	}
	o := outOptions(t, dir)
	o.Shuffle, o.NumSplits = true, 2
	want := outBatchRows(t, outOpen(t, o))
	ds := outOpen(t, o)
	var got [][]outSynthRow
	for rows, err := range typed.Structs[outSynthRow](context.Background(), ds) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, rows)
		if len(got) == 3 {
			break
		}
	}
	for rows, err := range typed.Structs[outSynthRow](context.Background(), ds) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, rows)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatal("break and resume differ from one pass of Batches")
	}
}

// A null into a non-pointer field is an error naming the column, the row
// and the field; pointers and []byte take nulls.
func TestStructsNullError(t *testing.T) {
	dir := outWriteTyped(t)
	type row struct {
		ID int64 `sluice:"id"`
		NI int64 `sluice:"ni"`
	}
	ds := outOpen(t, outOptions(t, dir))
	var got error
	n := 0
	for _, err := range typed.Structs[row](context.Background(), ds) {
		if err != nil {
			got = err
			break
		}
		n++
	}
	if !errors.Is(got, typed.ErrNullValue) {
		t.Fatalf("got %v, want typed.ErrNullValue", got)
	}
	for _, want := range []string{`column "ni"`, "int64", "row 2", "field NI", "batch 0", "*int64"} {
		if !strings.Contains(got.Error(), want) {
			t.Fatalf("error %q does not contain %q", got, want)
		}
	}
	if n != 0 {
		t.Fatalf("%d batches before the error, want 0", n)
	}
}

// Mapping errors come before anything is read, wrap typed.ErrOutputMapping, and
// name the column, its type, the field and its type.
func TestStructsMappingErrors(t *testing.T) {
	schema := arrow.NewSchema(append(slices.Clone(outTypedSchema.Fields()),
		arrow.Field{Name: "Label", Type: arrow.PrimitiveTypes.Int64},
		arrow.Field{Name: "label", Type: arrow.PrimitiveTypes.Int64},
		arrow.Field{Name: "tags", Type: arrow.ListOf(arrow.BinaryTypes.String)},
	), nil)
	type embed struct {
		ID int64 `sluice:"id"`
	}
	cases := []struct {
		name string
		typ  reflect.Type
		want []string
	}{
		{"narrowing", reflect.TypeFor[struct {
			A int32 `sluice:"id"`
		}](), []string{`column "id"`, "int64", "field A", "int32"}},
		{"signed to unsigned", reflect.TypeFor[struct {
			A uint64 `sluice:"i8"`
		}](), []string{`column "i8"`, "int8", "field A", "uint64", "negative"}},
		{"uint64 to int64", reflect.TypeFor[struct {
			A int64 `sluice:"u64"`
		}](), []string{`column "u64"`, "uint64", "field A", "int64"}},
		{"float64 to float32", reflect.TypeFor[struct {
			A float32 `sluice:"f64"`
		}](), []string{`column "f64"`, "float64", "field A", "float32", "round"}},
		{"int32 to float32", reflect.TypeFor[struct {
			A float32 `sluice:"i32"`
		}](), []string{`column "i32"`, "int32", "field A", "float32"}},
		{"int64 to float64", reflect.TypeFor[struct {
			A float64 `sluice:"id"`
		}](), []string{`column "id"`, "int64", "field A", "float64"}},
		{"string to int", reflect.TypeFor[struct {
			A int64 `sluice:"name"`
		}](), []string{`column "name"`, "utf8", "field A", "int64"}},
		{"int to string", reflect.TypeFor[struct {
			A string `sluice:"id"`
		}](), []string{`column "id"`, "int64", "field A", "string"}},
		{"timestamp to int", reflect.TypeFor[struct {
			A int64 `sluice:"ts"`
		}](), []string{`column "ts"`, "timestamp[us, tz=UTC]", "field A", "int64"}},
		{"bool to int", reflect.TypeFor[struct {
			A int64 `sluice:"flag"`
		}](), []string{`column "flag"`, "bool", "field A", "int64"}},
		{"list", reflect.TypeFor[struct {
			A []string `sluice:"tags"`
		}](), []string{`column "tags"`, "list", "field A", "[]string", "not supported"}},
		{"map field", reflect.TypeFor[struct {
			A map[string]int `sluice:"id"`
		}](), []string{`column "id"`, "field A", "map[string]int"}},
		{"pointer to pointer", reflect.TypeFor[struct {
			A **int64 `sluice:"id"`
		}](), []string{`column "id"`, "field A", "**int64", "pointer to a pointer"}},
		{"missing tagged column", reflect.TypeFor[struct {
			A int64 `sluice:"nope"`
		}](), []string{"field A", `no column "nope"`}},
		{"untagged without a column", reflect.TypeFor[struct {
			ID    int64 `sluice:"id"`
			Lable int64
		}](), []string{"field Lable", `no column "Lable"`, `sluice:"-"`}},
		{"ambiguous ignoring case", reflect.TypeFor[struct {
			LABEL int64
		}](), []string{"field LABEL", `"Label"`, `"label"`}},
		{"two fields one column", reflect.TypeFor[struct {
			A int64 `sluice:"id"`
			B int64 `sluice:"id"`
		}](), []string{"fields A and B", `column "id"`}},
		{"unexported tagged", reflect.TypeFor[struct {
			a int64 `sluice:"id"`
		}](), []string{"field a", "unexported"}},
		{"tag option", reflect.TypeFor[struct {
			A int64 `sluice:"id,omitempty"`
		}](), []string{"field A", "omitempty"}},
		{"embedded pointer", reflect.TypeFor[struct {
			*embed
			X float64 `sluice:"f64"`
		}](), []string{"field embed.ID", "embedded pointer embed"}},
		{"no fields", reflect.TypeFor[struct {
			A int64 `sluice:"-"`
		}](), []string{"no field"}},
		{"not a struct", reflect.TypeFor[int](), []string{"Structs[int]", "struct"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := typed.NewStructPlan(schema, c.typ)
			if !errors.Is(err, typed.ErrOutputMapping) {
				t.Fatalf("got %v, want typed.ErrOutputMapping", err)
			}
			t.Log(err)
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Fatalf("error %q does not contain %q", err, w)
				}
			}
		})
	}

	// Exact names win over names equal ignoring case, and embedded structs
	// promote their fields.
	type ok struct {
		embed
		Label   int64
		skipped struct{ A int }
	}
	p, err := typed.NewStructPlan(schema, reflect.TypeFor[ok]())
	if err != nil {
		t.Fatal(err)
	}
	if f := p.Fields(); len(f) != 2 || f[0].Column != "id" || f[0].Name != "embed.ID" || f[1].Column != "Label" {
		t.Fatalf("got fields %+v", f)
	}

	// Through the API: the error is the first and only value, and the
	// dataset did not move.
	dir := outWriteTyped(t)
	ds := outOpen(t, outOptions(t, dir))
	n := 0
	for rows, err := range typed.Structs[struct {
		A int32 `sluice:"id"`
	}](context.Background(), ds) {
		n++
		if rows != nil || !errors.Is(err, typed.ErrOutputMapping) {
			t.Fatalf("got %v, %v", rows, err)
		}
	}
	if n != 1 {
		t.Fatalf("%d values, want 1", n)
	}
	for rows, err := range typed.Structs[outTyped](context.Background(), ds) {
		if err != nil {
			t.Fatal(err)
		}
		if rows[0].ID != 0 {
			t.Fatalf("first row after a mapping error has id %d, want 0", rows[0].ID)
		}
		break
	}
}

// Types Parquet does not round-trip, decoded from batches built in memory
// (sliced, so that offsets do not start at zero).
func TestStructsInMemoryTypes(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "h", Type: arrow.FixedWidthTypes.Float16},
		{Name: "ls", Type: arrow.BinaryTypes.LargeString},
		{Name: "lb", Type: arrow.BinaryTypes.LargeBinary},
		{Name: "sv", Type: arrow.BinaryTypes.StringView},
		{Name: "bv", Type: arrow.BinaryTypes.BinaryView},
		{Name: "fb", Type: &arrow.FixedSizeBinaryType{ByteWidth: 3}, Nullable: true},
		{Name: "d64", Type: arrow.FixedWidthTypes.Date64},
		{Name: "tss", Type: &arrow.TimestampType{Unit: arrow.Second, TimeZone: "+05:30"}},
		{Name: "i16", Type: arrow.PrimitiveTypes.Int16},
		{Name: "u32", Type: arrow.PrimitiveTypes.Uint32},
		{Name: "u16", Type: arrow.PrimitiveTypes.Uint16},
		{Name: "nf", Type: arrow.PrimitiveTypes.Float32, Nullable: true},
		{Name: "nbool", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
	}, nil)
	const n = 50
	b := array.NewRecordBuilder(mem, schema)
	long := strings.Repeat("x", 20) // longer than a view's inline 12 bytes
	for i := range n {
		b.Field(0).(*array.Float16Builder).Append(float16.New(float32(i) / 4))
		b.Field(1).(*array.LargeStringBuilder).Append(fmt.Sprint("ls", i))
		b.Field(2).(*array.BinaryBuilder).Append([]byte(fmt.Sprint("lb", i)))
		b.Field(3).(*array.StringViewBuilder).Append(fmt.Sprint(long, i))
		b.Field(4).(*array.BinaryViewBuilder).Append([]byte(fmt.Sprint("bv", i)))
		if i%3 == 0 {
			b.Field(5).AppendNull()
		} else {
			b.Field(5).(*array.FixedSizeBinaryBuilder).Append([]byte{byte(i), 1, 2})
		}
		b.Field(6).(*array.Date64Builder).Append(arrow.Date64((int64(i) + 19000) * 86_400_000))
		b.Field(7).(*array.TimestampBuilder).Append(arrow.Timestamp(1_700_000_000 + i))
		b.Field(8).(*array.Int16Builder).Append(int16(-100 * i))
		b.Field(9).(*array.Uint32Builder).Append(uint32(4_000_000_000 + i))
		b.Field(10).(*array.Uint16Builder).Append(uint16(60000 + i))
		if i%2 == 0 {
			b.Field(11).AppendNull()
			b.Field(12).AppendNull()
		} else {
			b.Field(11).(*array.Float32Builder).Append(float32(i) + 0.5)
			b.Field(12).(*array.BooleanBuilder).Append(i%4 == 1)
		}
	}
	whole := b.NewRecordBatch()
	b.Release()
	rec := whole.NewSlice(7, n)
	whole.Release()
	defer rec.Release()

	type row struct {
		H     float32 `sluice:"h"`
		LS    string  `sluice:"ls"`
		LB    string  `sluice:"lb"`
		SV    []byte  `sluice:"sv"`
		BV    string  `sluice:"bv"`
		FB    []byte  `sluice:"fb"`
		D64   time.Time
		TSS   time.Time
		I16   float32 `sluice:"i16"`
		U32   int64   `sluice:"u32"`
		U16   float32 `sluice:"u16"`
		NF    *float64
		NBool *bool
	}
	p, err := typed.NewStructPlan(schema, reflect.TypeFor[row]())
	if err != nil {
		t.Fatal(err)
	}
	rows, err := typed.DecodeStructs[row](p, rec)
	if err != nil {
		t.Fatal(err)
	}
	zone := time.FixedZone("+05:30", 5*3600+1800)
	for r, got := range rows {
		i := r + 7
		want := row{
			H:   float32(i) / 4,
			LS:  fmt.Sprint("ls", i),
			LB:  fmt.Sprint("lb", i),
			SV:  []byte(fmt.Sprint(long, i)),
			BV:  fmt.Sprint("bv", i),
			D64: time.Unix((int64(i)+19000)*86400, 0).UTC(),
			TSS: time.Unix(int64(1_700_000_000+i), 0).In(zone),
			I16: float32(-100 * i),
			U32: int64(4_000_000_000 + i),
			U16: float32(60000 + i),
		}
		if i%3 != 0 {
			want.FB = []byte{byte(i), 1, 2}
		}
		if i%2 == 1 {
			f, v := float64(float32(i)+0.5), i%4 == 1
			want.NF, want.NBool = &f, &v
		}
		if !got.TSS.Equal(want.TSS) || got.TSS.Location().String() != "+05:30" {
			t.Fatalf("row %d: TSS = %v, want %v", r, got.TSS, want.TSS)
		}
		got.TSS, want.TSS = time.Time{}, time.Time{}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("row %d:\n got %+v\nwant %+v", r, got, want)
		}
	}
	// Appending to one []byte value never overwrites the next.
	_ = append(rows[0].SV, 'Z')
	if string(rows[1].SV) != fmt.Sprint(long, 8) {
		t.Fatalf("append to a value changed the next: %q", rows[1].SV)
	}
}

// ---- Rows ----

// Rows maps every type to its documented Go type, and nulls to nil.
func TestRowsValues(t *testing.T) {
	dir := outWriteTyped(t)
	ds := outOpen(t, outOptions(t, dir))
	// The Parquet files give back the types written (their Arrow schema is
	// stored), so every conversion below is from the type it names.
	for i, f := range ds.Schema().Fields() {
		if w := outTypedSchema.Field(i); f.Name != w.Name || !arrow.TypeEqual(f.Type, w.Type) {
			t.Fatalf("column %d reads back as %s %s, written as %s %s", i, f.Name, f.Type, w.Name, w.Type)
		}
	}
	var all []map[string]any
	for rows, err := range typed.Rows(context.Background(), ds) {
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, rows...)
	}
	if len(all) != outTypedFiles*outTypedPerFile {
		t.Fatalf("got %d rows", len(all))
	}
	for i, m := range all {
		w := outWant(int64(i))
		want := map[string]any{
			"id": w.ID, "i8": int64(w.I8), "i16": int64(w.I16), "i32": w.I32,
			"u8": int64(w.U8), "u16": int64(w.U16), "u32": int64(w.U32), "u64": w.U64,
			"f32": w.F32, "f64": w.F64, "flag": w.Flag, "name": w.Name, "blob": w.Blob,
			"ts": w.TS, "tsny": w.TSNY, "tsn": w.TSN, "day": w.Day,
			"ni": nil, "ns": nil, "nts": nil, "nb": nil,
		}
		if w.NI != nil {
			want["ni"] = *w.NI
		}
		if w.NS != nil {
			want["ns"] = *w.NS
		}
		if w.NTS != nil {
			want["nts"] = *w.NTS
		}
		if w.NB != nil {
			want["nb"] = w.NB
		}
		if len(m) != len(want) {
			t.Fatalf("row %d has %d keys, want %d", i, len(m), len(want))
		}
		for k, wv := range want {
			gv, ok := m[k]
			if !ok {
				t.Fatalf("row %d: no key %q", i, k)
			}
			if wt, isTime := wv.(time.Time); isTime {
				gt, ok := gv.(time.Time)
				if !ok || !gt.Equal(wt) || gt.Location().String() != wt.Location().String() {
					t.Fatalf("row %d: %s = %#v, want %v", i, k, gv, wt)
				}
				continue
			}
			if !reflect.DeepEqual(gv, wv) {
				t.Fatalf("row %d: %s = %#v (%T), want %#v (%T)", i, k, gv, gv, wv, wv)
			}
		}
	}
}

func TestRowsUnsupportedColumn(t *testing.T) {
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "tags", Type: arrow.ListOf(arrow.BinaryTypes.String)},
	}, nil)
	_, err := typed.NewRowsPlan(schema)
	if !errors.Is(err, typed.ErrOutputMapping) || !strings.Contains(err.Error(), `column "tags"`) || !strings.Contains(err.Error(), "list") {
		t.Fatalf("got %v", err)
	}
}

// ---- Matrices ----

func TestMatricesValues(t *testing.T) {
	dir := outWriteTyped(t)
	o := outOptions(t, dir)
	o.Shuffle = true
	ds := outOpen(t, o)
	cols := []string{"f64", "i8", "flag", "u64", "f32", "u16", "id", "f64"}
	var ids []int64
	for m, err := range typed.Matrices(context.Background(), ds, cols) {
		if err != nil {
			t.Fatal(err)
		}
		if len(m.Data) != m.Rows*len(cols) {
			t.Fatalf("%d values for %d rows", len(m.Data), m.Rows)
		}
		for r := range m.Rows {
			id := int64(m.Data[r*len(cols)+6])
			w := outWant(id)
			flag := float32(0)
			if w.Flag {
				flag = 1
			}
			want := []float32{float32(w.F64), float32(w.I8), flag, float32(w.U64), float32(w.F32), float32(w.U16), float32(id), float32(w.F64)}
			if !slices.Equal(m.Row(r), want) {
				t.Fatalf("id %d: row %v, want %v", id, m.Row(r), want)
			}
			ids = append(ids, id)
		}
	}
	outExactlyOnce(t, ids, outTypedFiles*outTypedPerFile)
}

func TestMatricesErrors(t *testing.T) {
	dir := outWriteTyped(t)
	ds := outOpen(t, outOptions(t, dir))
	for _, c := range []struct {
		cols []string
		want []string
	}{
		{nil, []string{"no columns"}},
		{[]string{"id", "nope"}, []string{`no column "nope"`}},
		{[]string{"id", "name"}, []string{`column "name"`, "utf8", "not numeric"}},
		{[]string{"ts"}, []string{`column "ts"`, "timestamp", "not numeric"}},
	} {
		n := 0
		for m, err := range typed.Matrices(context.Background(), ds, c.cols) {
			n++
			if !errors.Is(err, typed.ErrOutputMapping) || m.Data != nil {
				t.Fatalf("%v: got %v", c.cols, err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Fatalf("error %q does not contain %q", err, w)
				}
			}
		}
		if n != 1 {
			t.Fatalf("%v: %d values, want 1", c.cols, n)
		}
	}
	var got error
	for _, err := range typed.Matrices(context.Background(), ds, []string{"id", "ni"}) {
		if err != nil {
			got = err
			break
		}
	}
	if !errors.Is(got, typed.ErrNullValue) || !strings.Contains(got.Error(), `column "ni"`) || !strings.Contains(got.Error(), "row 2") {
		t.Fatalf("got %v, want a null error naming column ni, row 2", got)
	}
}

// The caller's columns slice may change after the call; the matrices keep
// their own.
func TestMatricesOwnColumns(t *testing.T) {
	p, err := typed.NewMatrixPlan(synth.Schema, []string{"x", "label"})
	if err != nil {
		t.Fatal(err)
	}
	cols := []string{"x", "label"}
	p2, _ := typed.NewMatrixPlan(synth.Schema, cols)
	cols[0] = "id"
	if p2.Columns()[0] != "x" || p.Columns()[1] != "label" {
		t.Fatal("the plan aliases the caller's columns")
	}
}

// ---- allocations ----

// outNumericRecord is an in-memory batch of n rows of numeric columns.
func outNumericRecord(mem memory.Allocator, n int) arrow.RecordBatch {
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "i32", Type: arrow.PrimitiveTypes.Int32},
		{Name: "x", Type: arrow.PrimitiveTypes.Float64},
		{Name: "f", Type: arrow.PrimitiveTypes.Float32},
		{Name: "ok", Type: arrow.FixedWidthTypes.Boolean},
		{Name: "s", Type: arrow.BinaryTypes.String},
	}, nil)
	b := array.NewRecordBuilder(mem, schema)
	defer b.Release()
	for i := range n {
		b.Field(0).(*array.Int64Builder).Append(int64(i))
		b.Field(1).(*array.Int32Builder).Append(int32(-i))
		b.Field(2).(*array.Float64Builder).Append(float64(i) / 8)
		b.Field(3).(*array.Float32Builder).Append(float32(i) * 2)
		b.Field(4).(*array.BooleanBuilder).Append(i%3 == 0)
		b.Field(5).(*array.StringBuilder).Append(fmt.Sprintf("v%06d", i))
	}
	return b.NewRecordBatch()
}

// A matrix costs one allocation per batch, whatever its size; so do
// Structs of numeric fields (the slice, and its reflect.Value), plus a
// constant number per string column.
func TestOutputsAllocsPerBatch(t *testing.T) {
	mp, err := typed.NewMatrixPlan(outNumericRecord(memory.DefaultAllocator, 1).Schema(), []string{"x", "id", "i32", "f", "ok"})
	if err != nil {
		t.Fatal(err)
	}
	type numeric struct {
		ID  int64   `sluice:"id"`
		I32 int64   `sluice:"i32"`
		X   float64 `sluice:"x"`
		F   float64 `sluice:"f"`
		OK  bool    `sluice:"ok"`
	}
	type withString struct {
		numeric
		S string `sluice:"s"`
	}
	np, err := typed.NewStructPlan(outNumericRecord(memory.DefaultAllocator, 1).Schema(), reflect.TypeFor[numeric]())
	if err != nil {
		t.Fatal(err)
	}
	sp, err := typed.NewStructPlan(outNumericRecord(memory.DefaultAllocator, 1).Schema(), reflect.TypeFor[withString]())
	if err != nil {
		t.Fatal(err)
	}
	allocs := func(n int) (matrix, numerics, strs float64) {
		rec := outNumericRecord(memory.DefaultAllocator, n)
		defer rec.Release()
		m, err := mp.Decode(rec)
		if err != nil || m.Rows != n || m.Data[5*(n-1)+1] != float32(n-1) {
			t.Fatalf("decode: %v", err)
		}
		matrix = testing.AllocsPerRun(20, func() { mp.Decode(rec) })
		numerics = testing.AllocsPerRun(20, func() { typed.DecodeStructs[numeric](np, rec) })
		strs = testing.AllocsPerRun(20, func() { typed.DecodeStructs[withString](sp, rec) })
		return
	}
	m1, n1, s1 := allocs(64)
	m2, n2, s2 := allocs(8192)
	if m1 != 1 || m2 != 1 {
		t.Errorf("Matrices: %v allocations for 64 rows, %v for 8192; want 1", m1, m2)
	}
	if n1 != n2 || n1 > 2 {
		t.Errorf("Structs of numbers: %v allocations for 64 rows, %v for 8192; want the same, at most 2", n1, n2)
	}
	if s1 != s2 {
		t.Errorf("Structs with a string: %v allocations for 64 rows, %v for 8192; want the same", s1, s2)
	}
	t.Logf("allocations per batch: Matrices %v, Structs of numbers %v, with a string %v", m2, n2, s2)
}

// ---- benchmarks ----

// BenchmarkStructs measures decoding alone (batches built in memory) and the
// whole stream from Parquet, against Batches on the same dataset.
func BenchmarkStructs(b *testing.B) {
	type numeric struct {
		ID  int64   `sluice:"id"`
		I32 int64   `sluice:"i32"`
		X   float64 `sluice:"x"`
		F   float64 `sluice:"f"`
		OK  bool    `sluice:"ok"`
	}
	type withString struct {
		numeric
		S string `sluice:"s"`
	}
	const n = 8192
	rec := outNumericRecord(memory.DefaultAllocator, n)
	defer rec.Release()
	decode := func(b *testing.B, fn func() error) {
		for b.Loop() {
			if err := fn(); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
	}
	b.Run("decode/5-numeric", func(b *testing.B) {
		p, _ := typed.NewStructPlan(rec.Schema(), reflect.TypeFor[numeric]())
		decode(b, func() error { _, err := typed.DecodeStructs[numeric](p, rec); return err })
	})
	b.Run("decode/5-numeric+string", func(b *testing.B) {
		p, _ := typed.NewStructPlan(rec.Schema(), reflect.TypeFor[withString]())
		decode(b, func() error { _, err := typed.DecodeStructs[withString](p, rec); return err })
	})
	b.Run("decode/matrix-5", func(b *testing.B) {
		p, _ := typed.NewMatrixPlan(rec.Schema(), []string{"id", "i32", "x", "f", "ok"})
		decode(b, func() error { _, err := p.Decode(rec); return err })
	})
	b.Run("decode/rows-6", func(b *testing.B) {
		p, _ := typed.NewRowsPlan(rec.Schema())
		decode(b, func() error { _, err := p.Decode(rec); return err })
	})

	dir := b.TempDir()
	spec := synth.Spec{Files: 4, RowsPerFile: 50_000, RowGroupRows: 10_000, Seed: 1}
	if err := synth.WriteDir(dir, spec); err != nil {
		b.Fatal(err)
	}
	streamed := func(b *testing.B, pass func(ds *stream.Dataset) (int, error)) {
		ds, err := stream.Open(context.Background(), stream.Options{URLs: []string{dir}, BatchSize: 1024})
		if err != nil {
			b.Fatal(err)
		}
		defer ds.Close()
		rows := 0
		for b.Loop() {
			got, err := pass(ds)
			if err != nil {
				b.Fatal(err)
			}
			rows += got
		}
		b.ReportMetric(float64(rows)/b.Elapsed().Seconds(), "rows/s")
	}
	b.Run("stream/batches", func(b *testing.B) {
		streamed(b, func(ds *stream.Dataset) (int, error) {
			n := 0
			for batch, err := range ds.Batches(context.Background()) {
				if err != nil {
					return 0, err
				}
				n += int(batch.NumRows())
			}
			return n, nil
		})
	})
	b.Run("stream/structs", func(b *testing.B) {
		streamed(b, func(ds *stream.Dataset) (int, error) {
			n := 0
			for rows, err := range typed.Structs[outSynthRow](context.Background(), ds) {
				if err != nil {
					return 0, err
				}
				n += len(rows)
			}
			return n, nil
		})
	})
}

// ---- example ----

func ExampleStructs() {
	dir, err := os.MkdirTemp("", "sluice-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	if err := synth.WriteDir(dir, synth.Spec{Files: 1, RowsPerFile: 5, Classes: 3}); err != nil {
		panic(err)
	}

	type Row struct {
		ID    int64 `sluice:"id"`
		Label int64 // no tag: the column "label"
	}
	ctx := context.Background()
	ds, err := stream.Open(ctx, stream.Options{URLs: []string{dir}, Columns: []string{"id", "label"}, BatchSize: 2})
	if err != nil {
		panic(err)
	}
	defer ds.Close()
	for rows, err := range typed.Structs[Row](ctx, ds) {
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("%+v\n", rows)
	}
	// Output:
	// [{ID:0 Label:1} {ID:1 Label:2}]
	// [{ID:2 Label:1} {ID:3 Label:0}]
	// [{ID:4 Label:1}]
}
