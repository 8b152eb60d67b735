package orc_test

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/sluicedata/sluice/formats"
	"github.com/sluicedata/sluice/formats/orc"
	"github.com/sluicedata/sluice/internal/testkit/orcwrite"
	vc "github.com/sluicedata/sluice/internal/testkit/valuecheck"
)

var writtenSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "i", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
	{Name: "x", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	{Name: "f", Type: arrow.PrimitiveTypes.Float32},
	{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "b", Type: arrow.BinaryTypes.Binary},
	{Name: "ok", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
}, nil)

// randomBatch is rows [from, from+n) of a deterministic table.
func randomBatch(mem memory.Allocator, from, n int64, seed uint64) arrow.RecordBatch {
	b := array.NewRecordBuilder(mem, writtenSchema)
	defer b.Release()
	pcg := rand.NewPCG(0, 0)
	r := rand.New(pcg)
	for row := from; row < from+n; row++ {
		pcg.Seed(seed, uint64(row)) // each row its own, however batches cut them
		b.Field(0).(*array.Int64Builder).Append(row)
		if r.IntN(7) == 0 {
			b.Field(1).AppendNull()
		} else {
			b.Field(1).(*array.Int32Builder).Append(int32(r.Uint32()) >> r.IntN(32))
		}
		if r.IntN(5) == 0 {
			b.Field(2).AppendNull()
		} else {
			b.Field(2).(*array.Float64Builder).Append(r.NormFloat64())
		}
		b.Field(3).(*array.Float32Builder).Append(float32(row % 17))
		if r.IntN(9) == 0 {
			b.Field(4).AppendNull()
		} else {
			b.Field(4).(*array.StringBuilder).Append(fmt.Sprintf("s%d-%x", row%101, r.Uint32()))
		}
		b.Field(5).(*array.BinaryBuilder).Append([]byte(fmt.Sprint(row%3, "x")))
		if row%11 == 0 {
			b.Field(6).AppendNull()
		} else {
			b.Field(6).(*array.BooleanBuilder).Append(r.IntN(3) == 0)
		}
	}
	return b.NewRecordBatch()
}

// writeORC writes rows [0, rows) of the random table to path.
func writeORC(t testing.TB, path string, rows int64, opts orcwrite.Options) {
	t.Helper()
	fh, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	w, err := orcwrite.New(fh, writtenSchema, opts)
	if err != nil {
		t.Fatal(err)
	}
	mem := memory.NewGoAllocator()
	for at := int64(0); at < rows; at += 3001 {
		b := randomBatch(mem, at, min(3001, rows-at), 5)
		err := w.Write(b)
		b.Release()
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestWrittenFiles: files orcwrite writes read back to the rows written,
// whole and in random ranges, with every codec, with and without a row
// index.
func TestWrittenFiles(t *testing.T) {
	const rows = 25000
	defer seeksHeld(t)()
	for _, o := range []orcwrite.Options{
		{StripeRows: 10000, RowIndexStride: 1000, Compression: orcwrite.Zlib, BlockSize: 4 << 10},
		{StripeRows: 7000, RowIndexStride: 512, Compression: orcwrite.None},
		{StripeRows: 25000, RowIndexStride: 2000, Compression: orcwrite.Zstd, BlockSize: 8 << 10},
		{StripeRows: 9000, RowIndexStride: -1, Compression: orcwrite.Snappy},
	} {
		t.Run(fmt.Sprintf("%+v", o), func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			path := filepath.Join(t.TempDir(), "w.orc")
			writeORC(t, path, rows, o)
			ds := plan(t, []string{path}, nil)
			if ds.Rows() != rows {
				t.Fatalf("%d rows, want %d", ds.Rows(), rows)
			}
			want := randomBatch(mem, 0, rows, 5)
			defer want.Release()
			r := rand.New(rand.NewPCG(1, 2))
			reads := 8
			if raceEnabled {
				reads = 3
			}
			for k := range reads {
				lo, hi := int64(0), int64(rows)
				if k > 0 {
					lo = r.Int64N(rows)
					hi = lo + 1 + r.Int64N(rows-lo)
				}
				got := readRange(t, ds, lo, hi, 1+r.IntN(4000), mem)
				for c := range got {
					w := array.NewSlice(want.Column(c), lo, hi)
					if !array.Equal(w, got[c]) {
						t.Errorf("rows [%d, %d) column %q differ", lo, hi, ds.Schema.Field(c).Name)
					}
					w.Release()
				}
				release(got)
			}
		})
	}
}

// TestCutStripeFetchedAboutOnce: the two halves of a stripe cut anywhere
// fetch together little more than the stripe, as ranks sharing it do.
func TestCutStripeFetchedAboutOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "w.orc")
	writeORC(t, path, 60000, orcwrite.Options{StripeRows: 60000, RowIndexStride: 1000, Compression: orcwrite.Zlib, BlockSize: 16 << 10})
	ds := plan(t, []string{path}, []string{"id", "x", "s"})
	fetch := func(lo, hi int64) int64 {
		fe, err := ds.Fetch(context.Background(), 0, ds.RowRange(0, lo, hi))
		if err != nil {
			t.Fatal(err)
		}
		return fe.Bytes
	}
	whole := fetch(0, 60000)
	for _, cut := range []int64{1, 17500, 30000, 59999} {
		a, b := fetch(0, cut), fetch(cut, 60000)
		if ratio := float64(a+b) / float64(whole); ratio > 1.1 {
			t.Errorf("cut at %d: halves fetch %d + %d bytes, %.2fx the stripe's %d", cut, a, b, ratio, whole)
		}
	}
	if f := ds.Fragments[0]; !f.Units[0].Paged {
		t.Error("a stripe with a row index is not paged")
	}
	if stride, ok := orc.RowIndexStride(ds.Fragments[0]); !ok || stride != 1000 {
		t.Errorf("row index stride %d, %t", stride, ok)
	}
	_ = formats.Unit{}
}

// TestProjectionFetchesSelectedStreams: a read of some columns fetches only
// their streams, and delivers the same values as the whole read.
func TestProjectionFetchesSelectedStreams(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	path := filepath.Join(t.TempDir(), "w.orc")
	writeORC(t, path, 20000, orcwrite.Options{StripeRows: 8000, RowIndexStride: 1000, Compression: orcwrite.Zlib, BlockSize: 8 << 10})
	fetched := func(ds *formats.Scan) int64 {
		fe, err := ds.Fetch(context.Background(), 0, ds.RowRange(0, 0, ds.Fragments[0].Rows))
		if err != nil {
			t.Fatal(err)
		}
		return fe.Bytes
	}
	all := plan(t, []string{path}, nil)
	ids := plan(t, []string{path}, []string{"ok", "id"})
	whole, some := fetched(all), fetched(ids)
	if some*3 > whole {
		t.Errorf("columns ok and id fetch %d bytes of the file's %d", some, whole)
	}
	want := readRange(t, all, 0, 20000, 3000, mem)
	defer release(want)
	got := readRange(t, ids, 0, 20000, 3000, mem)
	defer release(got)
	for i, c := range map[int]int{0: 6, 1: 0} {
		if !array.Equal(got[i], want[c]) {
			t.Errorf("column %q differs from the whole read's", ids.Schema.Field(i).Name)
		}
	}
}

// TestWrittenNested: structs (in structs), lists (of structs) and maps that
// orcwrite writes read back value for value, in several stripes, and the
// iceberg.id attributes of their types, at every depth, come as the
// Arrow field metadata PARQUET:field_id, where Iceberg's column mapping
// reads field ids.
func TestWrittenNested(t *testing.T) {
	cols := vc.Pick("id", "st", "lst", "mp", "mpi", "nest", "lstst")
	next := 0
	withIDs := func(f arrow.Field) arrow.Field {
		next++
		f.Metadata = arrow.NewMetadata([]string{"iceberg.id"}, []string{strconv.Itoa(next)})
		return f
	}
	var fields []arrow.Field
	for _, f := range vc.Schema(cols).Fields() {
		fields = append(fields, vc.EditFields(f, withIDs))
	}
	schema := arrow.NewSchema(fields, nil)
	const rows = 2500
	rec, err := vc.RecordOf(memory.NewGoAllocator(), schema, 0, rows)
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	path := filepath.Join(t.TempDir(), "nested.orc")
	fh, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w, err := orcwrite.New(fh, schema, orcwrite.Options{StripeRows: 700, RowIndexStride: -1, Compression: orcwrite.Zlib})
	if err == nil {
		if err = w.Write(rec); err == nil {
			err = w.Close()
		}
	}
	fh.Close()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := orcwrite.New(io.Discard, schema, orcwrite.Options{}); err == nil {
		t.Error("orcwrite took nested columns with a row index")
	}

	ds := plan(t, []string{path}, nil)
	var ids func(f arrow.Field) []string
	ids = func(f arrow.Field) []string {
		v, _ := f.Metadata.GetValue("PARQUET:field_id")
		out := []string{v}
		if nt, ok := f.Type.(arrow.NestedType); ok {
			for _, c := range nt.Fields() {
				out = append(out, ids(c)...)
			}
		}
		return out
	}
	var got, want []string
	for i, f := range ds.Schema.Fields() {
		got = append(got, ids(f)...)
		want = append(want, ids(vc.EditFields(schema.Field(i), func(f arrow.Field) arrow.Field {
			v, _ := f.Metadata.GetValue("iceberg.id")
			f.Metadata = arrow.NewMetadata([]string{"PARQUET:field_id"}, []string{v})
			return f
		}))...)
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("field ids read\n%s\nwant\n%s", strings.Join(got, " "), strings.Join(want, " "))
	}
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	once := vc.NewOnce()
	err = readAll(ds, 333, mem, func(b arrow.RecordBatch) error {
		seen, err := vc.Batch(b, []string{"id", "st", "lst", "mp", "mpi", "nest", "lstst"})
		once.Add(seen)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	all := make([]int64, rows)
	for i := range all {
		all[i] = int64(i)
	}
	if err := once.Exactly(all); err != nil {
		t.Fatal(err)
	}
}

// TestIcebergFileIDs: the ORC example Iceberg's writer wrote carries an
// iceberg.id on every type; each comes as a field id, at every depth, and
// no two are the same.
func TestIcebergFileIDs(t *testing.T) {
	ds := plan(t, []string{filepath.Join(orcExamples(t), "complextypes_iceberg.orc")}, nil)
	seen := map[string]string{}
	var walk func(path string, f arrow.Field)
	walk = func(path string, f arrow.Field) {
		path += "/" + f.Name
		id, ok := f.Metadata.GetValue("PARQUET:field_id")
		if !ok {
			t.Errorf("%s has no field id", path)
		} else if other, dup := seen[id]; dup {
			t.Errorf("%s and %s both have field id %s", other, path, id)
		}
		seen[id] = path
		if nt, ok := f.Type.(arrow.NestedType); ok {
			for _, c := range nt.Fields() {
				if _, entries := f.Type.(*arrow.MapType); entries {
					// The map's entries struct is Arrow's, not a type of
					// the file: its key and value are.
					for _, kv := range c.Type.(*arrow.StructType).Fields() {
						walk(path, kv)
					}
					continue
				}
				walk(path, c)
			}
		}
	}
	for _, f := range ds.Schema.Fields() {
		walk("", f)
	}
	if len(seen) < 20 {
		t.Errorf("%d fields with ids, want every type of the file's", len(seen))
	}
}
