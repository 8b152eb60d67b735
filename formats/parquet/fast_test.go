package parquet_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

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
	"github.com/sluicedata/sluice/internal/testkit/sample"
)

// readBatches reads rows [lo, hi) of every fragment of path, as is or
// with ArrowGoDecode, in batches of batchRows. leaked is the Arrow memory
// left outstanding once the batches are released.
func readBatches(ctx context.Context, path string, arrowGo bool, batchRows int, part bool) (batches []arrow.RecordBatch, mem *memory.CheckedAllocator, err error) {
	ds, err := formats.Plan(ctx, []string{path}, formats.PlanOptions{Formats: []formats.Format{parquet.Format{ArrowGoDecode: arrowGo}}})
	if err != nil {
		return nil, nil, err
	}
	defer ds.Close()
	mem = memory.NewCheckedAllocator(memory.NewGoAllocator())
	for i, f := range ds.Fragments {
		lo, hi := int64(0), f.Rows
		if part {
			lo, hi = f.Rows/3, 2*f.Rows/3+1
			hi = min(hi, f.Rows)
		}
		err := ds.Read(ctx, i, ds.RowRange(i, lo, hi), batchRows, runtimeChecked{mem}, func(b arrow.RecordBatch) error {
			batches = append(batches, b)
			return nil
		})
		if err != nil {
			return batches, mem, err
		}
	}
	return batches, mem, nil
}

// runtimeChecked is a checked allocator over Go's that says so
// (unzeroed.RuntimeMemory): reads with it hand out what they do with the
// default allocator, dictionary bytes lent included.
type runtimeChecked struct{ *memory.CheckedAllocator }

func (runtimeChecked) RuntimeMemory() bool { return true }

func releaseBatches(bs []arrow.RecordBatch) {
	for _, b := range bs {
		b.Release()
	}
}

// sameBatches reports how fast (flatdecode's) differs from slow
// (arrow-go's): batch by batch, schema, length, and every column's
// values, validity and type. NaNs equal NaNs.
func sameBatches(fast, slow []arrow.RecordBatch) error {
	if len(fast) != len(slow) {
		return fmt.Errorf("%d batches, arrow-go %d", len(fast), len(slow))
	}
	for i := range fast {
		f, s := fast[i], slow[i]
		if !f.Schema().Equal(s.Schema()) {
			return fmt.Errorf("batch %d: schema %s, arrow-go %s", i, f.Schema(), s.Schema())
		}
		if f.NumRows() != s.NumRows() {
			return fmt.Errorf("batch %d: %d rows, arrow-go %d", i, f.NumRows(), s.NumRows())
		}
		for c := range f.Columns() {
			a, b := f.Column(c), s.Column(c)
			if !arrow.TypeEqual(a.DataType(), b.DataType()) {
				return fmt.Errorf("batch %d column %q: type %s, arrow-go %s", i, f.ColumnName(c), a.DataType(), b.DataType())
			}
			if a.NullN() != b.NullN() {
				return fmt.Errorf("batch %d column %q: %d nulls, arrow-go %d", i, f.ColumnName(c), a.NullN(), b.NullN())
			}
			if !array.Equal(a, b) && !array.ApproxEqual(a, b, array.WithNaNsEqual(true), array.WithAbsTolerance(0)) {
				return fmt.Errorf("batch %d column %q: values differ from arrow-go's:\n%v\n%v", i, f.ColumnName(c), clip(a), clip(b))
			}
		}
	}
	return nil
}

func clip(a arrow.Array) string {
	s := fmt.Sprint(a)
	if len(s) > 400 {
		s = s[:400] + "..."
	}
	return s
}

// compareFile reads path both ways, whole and a middle part, and reports
// any difference; both must fail or neither.
func compareFile(t *testing.T, path string, batchRows int) {
	t.Helper()
	for _, part := range []bool{false, true} {
		err := withDeadline(t, path, 60*time.Second, func(ctx context.Context) error {
			fast, fmem, ferr := readBatches(ctx, path, false, batchRows, part)
			defer releaseBatches(fast)
			before := parquet.FastChunks()
			slow, _, serr := readBatches(ctx, path, true, batchRows, part)
			defer releaseBatches(slow)
			if n := parquet.FastChunks() - before; n != 0 {
				return fmt.Errorf("ArrowGoDecode set, yet %d chunks took the own decoder", n)
			}
			switch {
			case (ferr == nil) != (serr == nil):
				return fmt.Errorf("own decoder: %v; arrow-go: %v", ferr, serr)
			case ferr != nil:
				if !errors.Is(ferr, formats.ErrCorrupt) && !errors.Is(ferr, formats.ErrSchema) {
					return fmt.Errorf("own decoder's error wraps neither ErrCorrupt nor ErrSchema: %v", ferr)
				}
				return nil
			}
			if err := sameBatches(fast, slow); err != nil {
				return err
			}
			releaseBatches(fast)
			fast = nil
			if n := fmem.CurrentAlloc(); n != 0 && !usesDelta(t, path) {
				return fmt.Errorf("%d bytes of Arrow memory outstanding", n)
			}
			return nil
		})
		if err != nil {
			t.Errorf("%s (part %v): %v", path, part, err)
		}
	}
}

// TestFastDecodeCorpus compares the own decoder with arrow-go's on every
// Parquet file of the shared corpus.
func TestFastDecodeCorpus(t *testing.T) {
	root := corpus.Dir(t)
	var files []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, ".parquet") {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 100 {
		t.Fatalf("found only %d Parquet files under %s", len(files), root)
	}
	before := parquet.FastChunks()
	for i, p := range files {
		if _, skip := corpusSkip[filepath.Base(p)]; skip || i%sample.Count(1, 3) != 0 {
			continue
		}
		compareFile(t, p, 1000)
	}
	n := parquet.FastChunks() - before
	t.Logf("%d files, %d column chunks decoded by the own decoder", len(files), n)
	if n < 100 {
		t.Errorf("only %d column chunks took the own decoder: the comparison is nearly empty", n)
	}
}

// genColumn is a column of the generated files: its values and the
// encodings it can be written in.
type genColumn struct {
	field arrow.Field
	make  func(b array.Builder, r *rand.Rand, null bool)
	encs  []pq.Encoding
}

var (
	intEncs   = []pq.Encoding{pq.Encodings.Plain, pq.Encodings.RLEDict, pq.Encodings.DeltaBinaryPacked, pq.Encodings.ByteStreamSplit}
	floatEncs = []pq.Encoding{pq.Encodings.Plain, pq.Encodings.RLEDict, pq.Encodings.ByteStreamSplit}
	byteEncs  = []pq.Encoding{pq.Encodings.Plain, pq.Encodings.RLEDict, pq.Encodings.DeltaLengthByteArray, pq.Encodings.DeltaByteArray}
	boolEncs  = []pq.Encoding{pq.Encodings.Plain, pq.Encodings.RLE}
	// FIXED_LEN_BYTE_ARRAY: arrow-go writes no DELTA_BYTE_ARRAY for it
	// (TestFixedLenDeltaByteArrayMixed reads that, against DuckDB).
	fixedEncs = []pq.Encoding{pq.Encodings.Plain, pq.Encodings.RLEDict, pq.Encodings.ByteStreamSplit}
)

// pick returns a random value from a small pool half the time (so that
// dictionaries pay), any value otherwise.
func pick(r *rand.Rand, pool, any func() uint64) uint64 {
	if r.IntN(2) == 0 {
		return pool()
	}
	return any()
}

func genColumns() []genColumn {
	u := func(r *rand.Rand) uint64 {
		return pick(r, func() uint64 { return uint64(r.IntN(20)) * 0x9e3779b97f4a7c15 }, r.Uint64)
	}
	ints := func(name string, typ arrow.DataType, set func(b array.Builder, v uint64)) genColumn {
		return genColumn{field: arrow.Field{Name: name, Type: typ, Nullable: true}, encs: intEncs, make: func(b array.Builder, r *rand.Rand, null bool) {
			if null {
				b.AppendNull()
				return
			}
			set(b, u(r))
		}}
	}
	str := func(r *rand.Rand) string {
		if r.IntN(2) == 0 {
			return fmt.Sprintf("v%d", r.IntN(30))
		}
		b := make([]byte, r.IntN(21))
		for i := range b {
			b[i] = byte('a' + r.IntN(26))
		}
		return string(b)
	}
	return []genColumn{
		ints("i8", arrow.PrimitiveTypes.Int8, func(b array.Builder, v uint64) { b.(*array.Int8Builder).Append(int8(v)) }),
		ints("u16", arrow.PrimitiveTypes.Uint16, func(b array.Builder, v uint64) { b.(*array.Uint16Builder).Append(uint16(v)) }),
		ints("i32", arrow.PrimitiveTypes.Int32, func(b array.Builder, v uint64) { b.(*array.Int32Builder).Append(int32(v)) }),
		ints("u32", arrow.PrimitiveTypes.Uint32, func(b array.Builder, v uint64) { b.(*array.Uint32Builder).Append(uint32(v)) }),
		ints("i64", arrow.PrimitiveTypes.Int64, func(b array.Builder, v uint64) { b.(*array.Int64Builder).Append(int64(v)) }),
		ints("u64", arrow.PrimitiveTypes.Uint64, func(b array.Builder, v uint64) { b.(*array.Uint64Builder).Append(v) }),
		ints("d32", arrow.FixedWidthTypes.Date32, func(b array.Builder, v uint64) { b.(*array.Date32Builder).Append(arrow.Date32(int32(v % 100000))) }),
		ints("t32", arrow.FixedWidthTypes.Time32ms, func(b array.Builder, v uint64) { b.(*array.Time32Builder).Append(arrow.Time32(v % 86400000)) }),
		ints("t64", arrow.FixedWidthTypes.Time64us, func(b array.Builder, v uint64) { b.(*array.Time64Builder).Append(arrow.Time64(v % 86400000000)) }),
		ints("ts_ms", arrow.FixedWidthTypes.Timestamp_ms, func(b array.Builder, v uint64) { b.(*array.TimestampBuilder).Append(arrow.Timestamp(int64(v) >> 20)) }),
		ints("ts_us", &arrow.TimestampType{Unit: arrow.Microsecond}, func(b array.Builder, v uint64) { b.(*array.TimestampBuilder).Append(arrow.Timestamp(int64(v) >> 10)) }),
		ints("ts_ns", arrow.FixedWidthTypes.Timestamp_ns, func(b array.Builder, v uint64) { b.(*array.TimestampBuilder).Append(arrow.Timestamp(int64(v))) }),
		{field: arrow.Field{Name: "f32", Type: arrow.PrimitiveTypes.Float32, Nullable: true}, encs: floatEncs, make: func(b array.Builder, r *rand.Rand, null bool) {
			if null {
				b.AppendNull()
				return
			}
			b.(*array.Float32Builder).Append(float32(int(pick(r, func() uint64 { return uint64(r.IntN(10)) }, r.Uint64)%2000)) / 7)
		}},
		{field: arrow.Field{Name: "f64", Type: arrow.PrimitiveTypes.Float64, Nullable: true}, encs: floatEncs, make: func(b array.Builder, r *rand.Rand, null bool) {
			if null {
				b.AppendNull()
				return
			}
			b.(*array.Float64Builder).Append(r.NormFloat64() * float64(r.IntN(3)))
		}},
		{field: arrow.Field{Name: "bool", Type: arrow.FixedWidthTypes.Boolean, Nullable: true}, encs: boolEncs, make: func(b array.Builder, r *rand.Rand, null bool) {
			if null {
				b.AppendNull()
				return
			}
			b.(*array.BooleanBuilder).Append(r.IntN(3) == 0)
		}},
		{field: arrow.Field{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true}, encs: byteEncs, make: func(b array.Builder, r *rand.Rand, null bool) {
			if null {
				b.AppendNull()
				return
			}
			b.(*array.StringBuilder).Append(str(r))
		}},
		{field: arrow.Field{Name: "bin", Type: arrow.BinaryTypes.Binary, Nullable: true}, encs: byteEncs, make: func(b array.Builder, r *rand.Rand, null bool) {
			if null {
				b.AppendNull()
				return
			}
			b.(*array.BinaryBuilder).Append([]byte(str(r)))
		}},
		{field: arrow.Field{Name: "ls", Type: arrow.BinaryTypes.LargeString, Nullable: true}, encs: byteEncs, make: func(b array.Builder, r *rand.Rand, null bool) {
			if null {
				b.AppendNull()
				return
			}
			b.(*array.LargeStringBuilder).Append(str(r))
		}},
		{field: arrow.Field{Name: "fsb5", Type: &arrow.FixedSizeBinaryType{ByteWidth: 5}, Nullable: true}, encs: fixedEncs, make: func(b array.Builder, r *rand.Rand, null bool) {
			if null {
				b.AppendNull()
				return
			}
			b.(*array.FixedSizeBinaryBuilder).Append(binary.LittleEndian.AppendUint64(nil, u(r))[:5])
		}},
		{field: arrow.Field{Name: "uuid", Type: extensions.NewUUIDType(), Nullable: true}, encs: fixedEncs, make: func(b array.Builder, r *rand.Rand, null bool) {
			if null {
				b.AppendNull()
				return
			}
			b.(*extensions.UUIDBuilder).AppendBytes([16]byte(binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint64(nil, u(r)), u(r))))
		}},
	}
}

// writeGenerated writes rows rows of cols, each encoded in enc, to path.
// nulls: 0 none (required columns), 1 some, 2 all.
func writeGenerated(t *testing.T, path string, cols []genColumn, enc pq.Encoding, codec compress.Compression, nulls int, v2 bool, rows int) {
	t.Helper()
	writeGeneratedIn(t, path, cols, enc, codec, nulls, v2, rows, 1500, 700)
}

// writeGeneratedIn is writeGenerated in row groups of groupRows rows and
// data pages of about pageBytes bytes.
func writeGeneratedIn(t *testing.T, path string, cols []genColumn, enc pq.Encoding, codec compress.Compression, nulls int, v2 bool, rows, groupRows int, pageBytes int64) {
	t.Helper()
	r := rand.New(rand.NewPCG(uint64(len(path)), uint64(rows)))
	fields := make([]arrow.Field, len(cols))
	arrs := make([]arrow.Array, len(cols))
	for i, c := range cols {
		fields[i] = c.field
		fields[i].Nullable = nulls > 0
		b := array.NewBuilder(memory.DefaultAllocator, c.field.Type)
		for range rows {
			c.make(b, r, nulls == 2 || (nulls == 1 && r.IntN(10) < 3))
		}
		arrs[i] = b.NewArray()
		b.Release()
	}
	version := pq.DataPageV1
	if v2 {
		version = pq.DataPageV2
	}
	opts := []pq.WriterProperty{
		pq.WithCompression(codec), pq.WithDataPageVersion(version), pq.WithDataPageSize(pageBytes),
		pq.WithMaxRowGroupLength(int64(groupRows)), pq.WithDictionaryPageSizeLimit(1 << 20), pq.WithBatchSize(97),
	}
	if enc == pq.Encodings.RLEDict {
		opts = append(opts, pq.WithDictionaryDefault(true))
	} else {
		opts = append(opts, pq.WithDictionaryDefault(false), pq.WithEncoding(enc))
	}
	writeArrays(t, path, fields, arrs, rows, groupRows, opts...)
}

// writeArrays writes arrs, columns fields of rows rows, to path in row
// groups of groupRows rows with the writer properties opts, and releases
// them.
func writeArrays(t *testing.T, path string, fields []arrow.Field, arrs []arrow.Array, rows, groupRows int, opts ...pq.WriterProperty) {
	t.Helper()
	schema := arrow.NewSchema(fields, nil)
	rec := array.NewRecordBatch(schema, arrs, int64(rows))
	for _, a := range arrs {
		a.Release()
	}
	defer rec.Release()
	tbl := array.NewTableFromRecords(schema, []arrow.RecordBatch{rec})
	defer tbl.Release()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := pqarrow.WriteTable(tbl, f, int64(groupRows), pq.NewWriterProperties(opts...), pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema())); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// TestFastDecodeLongPages reads dictionary-encoded pages of more indices
// than flatdecode unpacks at a time (4096), whole and in batches that end
// inside a stretch.
func TestFastDecodeLongPages(t *testing.T) {
	var cols []genColumn
	for _, c := range genColumns() {
		if slices.Contains(c.encs, pq.Encodings.RLEDict) {
			cols = append(cols, c)
		}
	}
	for nulls := range 2 {
		path := filepath.Join(t.TempDir(), fmt.Sprintf("long_pages_nulls%d.parquet", nulls))
		writeGeneratedIn(t, path, cols, pq.Encodings.RLEDict, compress.Codecs.Snappy, nulls, nulls == 1, 3*4096+100, 1<<20, 1<<20)
		for _, batch := range []int{1 << 20, 5000} {
			compareFile(t, path, batch)
		}
	}
}

// TestFastDecodeGenerated compares the own decoder with arrow-go's on files
// written in every encoding, codec, page version and nullability it reads
// (and Brotli, which it leaves to arrow-go), with pages a few hundred bytes
// long so that batches cross pages and row groups.
func TestFastDecodeGenerated(t *testing.T) {
	dir := t.TempDir()
	all := genColumns()
	codecs := []compress.Compression{compress.Codecs.Uncompressed, compress.Codecs.Snappy, compress.Codecs.Gzip, compress.Codecs.Zstd, compress.Codecs.Lz4Raw, compress.Codecs.Brotli}
	encs := []pq.Encoding{pq.Encodings.Plain, pq.Encodings.RLEDict, pq.Encodings.DeltaBinaryPacked, pq.Encodings.ByteStreamSplit, pq.Encodings.RLE, pq.Encodings.DeltaLengthByteArray, pq.Encodings.DeltaByteArray}
	if testing.Short() {
		// Every encoding still, over the codecs that frame pages apart;
		// each codec's own decompression runs in the full count.
		codecs = codecs[:2]
	}
	files := 0
	for ei, enc := range encs {
		var cols []genColumn
		for _, c := range all {
			for _, e := range c.encs {
				if e == enc {
					cols = append(cols, c)
				}
			}
		}
		for ci, codec := range codecs {
			for nulls := range 3 {
				for vi, v2 := range []bool{false, true} {
					if testing.Short() && (ei+ci+nulls+vi)%2 == 1 {
						// Half the nullabilities and page versions,
						// the other half in the next codec.
						continue
					}
					name := fmt.Sprintf("%s_%s_nulls%d_v2%v.parquet", enc, codec, nulls, v2)
					path := filepath.Join(dir, name)
					writeGenerated(t, path, cols, enc, codec, nulls, v2, 4000)
					before := parquet.FastChunks()
					compareFile(t, path, 700)
					if codec == compress.Codecs.Snappy && nulls == 1 {
						// Batches of one row, and of more than a row group.
						// 4,000 batches of one row are most of this test's
						// time under the race detector: the pass without
						// it reads them.
						if !testing.Short() {
							compareFile(t, path, 1)
						}
						compareFile(t, path, 1<<20)
					}
					taken := parquet.FastChunks() - before
					if codec != compress.Codecs.Brotli && taken == 0 {
						t.Errorf("%s: no column chunk took the own decoder", name)
					}
					files++
				}
			}
		}
	}
	t.Logf("%d generated files compared", files)
}
