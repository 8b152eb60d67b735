package parquet_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	pq "github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"

	"github.com/sluicedata/sluice/formats/parquet"
	"github.com/sluicedata/sluice/internal/testkit/sample"
)

// distinctColumn is a column whose row i holds value(i): distinct values
// from row 0 to the row where repeat (if not 0) starts them over, so that
// a writer's dictionary holds them in row order and its indices count up.
type distinctColumn struct {
	field arrow.Field
	put   func(b array.Builder, v int)
}

func distinctColumns() []distinctColumn {
	return []distinctColumn{
		{arrow.Field{Name: "i32", Type: arrow.PrimitiveTypes.Int32}, func(b array.Builder, v int) { b.(*array.Int32Builder).Append(int32(v*7 - 3)) }},
		{arrow.Field{Name: "i64", Type: arrow.PrimitiveTypes.Int64}, func(b array.Builder, v int) { b.(*array.Int64Builder).Append(int64(v) * -0x61c8864680b583eb) }},
		{arrow.Field{Name: "u16", Type: arrow.PrimitiveTypes.Uint16}, func(b array.Builder, v int) { b.(*array.Uint16Builder).Append(uint16(v)) }},
		{arrow.Field{Name: "d32", Type: arrow.FixedWidthTypes.Date32}, func(b array.Builder, v int) { b.(*array.Date32Builder).Append(arrow.Date32(v)) }},
		{arrow.Field{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Microsecond}}, func(b array.Builder, v int) { b.(*array.TimestampBuilder).Append(arrow.Timestamp(v) * 1_000_003) }},
		{arrow.Field{Name: "f32", Type: arrow.PrimitiveTypes.Float32}, func(b array.Builder, v int) { b.(*array.Float32Builder).Append(float32(v) / 3) }},
		{arrow.Field{Name: "f64", Type: arrow.PrimitiveTypes.Float64}, func(b array.Builder, v int) { b.(*array.Float64Builder).Append(float64(v)/7 - 1e6) }},
		{arrow.Field{Name: "s", Type: arrow.BinaryTypes.String}, func(b array.Builder, v int) {
			b.(*array.StringBuilder).Append(fmt.Sprintf("row-%d-%s", v, string([]rune("héllo")[:v%6])))
		}},
		{arrow.Field{Name: "bin", Type: arrow.BinaryTypes.Binary}, func(b array.Builder, v int) { b.(*array.BinaryBuilder).Append([]byte(fmt.Sprintf("%x", v*v))) }},
		{arrow.Field{Name: "ls", Type: arrow.BinaryTypes.LargeString}, func(b array.Builder, v int) {
			b.(*array.LargeStringBuilder).Append(fmt.Sprintf("%0*d", 1+v%40, v))
		}},
	}
}

// writeDistinct writes rows rows of cols to path, row i holding value
// i % repeat (i where repeat is 0; where repeat is negative, i but for every
// -repeat-th row, which holds row 0's; where it is 1, i up to half the
// rows, then i - rows/4), null where null(i) says (nullable
// columns where null is not nil), in row groups of groupRows rows,
// dictionary-encoded with dictionary pages of up to dictBytes.
func writeDistinct(t *testing.T, path string, cols []distinctColumn, rows, repeat, groupRows int, null func(int) bool, nullable bool, dictBytes int64, v2 bool) {
	t.Helper()
	fields := make([]arrow.Field, len(cols))
	arrs := make([]arrow.Array, len(cols))
	for c, col := range cols {
		fields[c] = col.field
		fields[c].Nullable = nullable
		b := array.NewBuilder(memory.DefaultAllocator, col.field.Type)
		for i := range rows {
			v := i
			switch {
			case repeat == 1:
				if i >= rows/2 {
					v = i - rows/4
				}
			case repeat > 0:
				v = i % repeat
			case repeat < 0 && i%-repeat == -repeat-1:
				v = 0
			}
			if null != nil && null(i) {
				b.AppendNull()
				continue
			}
			col.put(b, v)
		}
		arrs[c] = b.NewArray()
		b.Release()
	}
	version := pq.DataPageV1
	if v2 {
		version = pq.DataPageV2
	}
	writeArrays(t, path, fields, arrs, rows, groupRows, pq.WithCompression(compress.Codecs.Snappy), pq.WithDataPageVersion(version),
		pq.WithDataPageSize(8<<10), pq.WithMaxRowGroupLength(int64(groupRows)), pq.WithDictionaryDefault(true),
		pq.WithDictionaryPageSizeLimit(dictBytes), pq.WithBatchSize(1000))
}

// TestFastDecodeLentDictionary compares the own decoder with arrow-go's on
// dictionary-encoded columns of distinct values, whose batches it builds
// of the dictionary's bytes where their indices count up (none null, in
// one page): in files where they do throughout, where nulls or repeated
// values break the count partway (inside a stretch of unpacked indices),
// where the dictionary fills and the chunk goes on in PLAIN pages, and in
// batches that end inside a page or cross pages and row groups.
func TestFastDecodeLentDictionary(t *testing.T) {
	dir := t.TempDir()
	cols := distinctColumns()
	cases := []struct {
		name     string
		rows     int
		repeat   int
		groups   int
		null     func(int) bool
		nullable bool
		dict     int64
		v2       bool
		lends    bool // some batch is to be lent
	}{
		{name: "required", rows: 20000, groups: 9000, dict: 1 << 20, lends: true},
		{name: "required v2", rows: 20000, groups: 9000, dict: 1 << 20, v2: true, lends: true},
		{name: "optional, no nulls", rows: 20000, groups: 9000, nullable: true, dict: 1 << 20, lends: true},
		{name: "optional, nulls from row 15000", rows: 20000, groups: 20000, nullable: true, dict: 1 << 20, null: func(i int) bool { return i >= 15000 && i%3 == 0 }, lends: true},
		{name: "optional, a null a page", rows: 20000, groups: 20000, nullable: true, dict: 1 << 20, null: func(i int) bool { return i%997 == 5 }, lends: true},
		{name: "row 0's value every 4000th row", rows: 20000, repeat: -4000, groups: 20000, dict: 1 << 20, lends: true},
		{name: "row 0's value every 100th row", rows: 20000, repeat: -100, groups: 20000, dict: 1 << 20},
		{name: "50 values over and over", rows: 9000, repeat: 50, groups: 9000, dict: 1 << 20},
		{name: "repeats after 6000 rows", rows: 20000, repeat: 6000, groups: 20000, dict: 1 << 20, lends: true},
		{name: "repeats after 4100 rows", rows: 9000, repeat: 4100, groups: 9000, dict: 1 << 20, lends: true},
		{name: "dictionary full, then PLAIN", rows: 30000, groups: 30000, dict: 16 << 10, lends: true},
	}
	batches := []int{65536, 4096, 5000, 333}
	if testing.Short() {
		batches = []int{4096, 333}
	}
	for _, c := range sample.Spread(cases, 4) {
		path := filepath.Join(dir, c.name+".parquet")
		writeDistinct(t, path, cols, c.rows, c.repeat, c.groups, c.null, c.nullable, c.dict, c.v2)
		before := parquet.LentBatches()
		for _, b := range batches {
			compareFile(t, path, b)
		}
		if lent := parquet.LentBatches() - before; (lent > 0) != c.lends {
			t.Errorf("%s: %d batches built of dictionary bytes", c.name, lent)
		}
	}
}

// readLent reads path in batches of batch rows with the own decoder, some
// of which must be lent, and with arrow-go's.
func readLent(t *testing.T, path string, batch int) (lent, want []arrow.RecordBatch) {
	t.Helper()
	ctx := context.Background()
	before := parquet.LentBatches()
	lent, _, err := readBatches(ctx, path, false, batch, false)
	if err != nil {
		t.Fatal(err)
	}
	if parquet.LentBatches() == before {
		releaseBatches(lent)
		t.Fatal("no batch was built of dictionary bytes")
	}
	if want, _, err = readBatches(ctx, path, true, batch, false); err != nil {
		releaseBatches(lent)
		t.Fatal(err)
	}
	return lent, want
}

// TestLentDictionaryStaysPut reads a file of distinct values in batches
// that lend the dictionary's bytes, keeps every batch, and reads the file
// again and again: later reads (which take pooled buffers the lent
// dictionaries must never be among) leave the kept batches' values as
// they were.
func TestLentDictionaryStaysPut(t *testing.T) {
	path := filepath.Join(t.TempDir(), "distinct.parquet")
	cols := distinctColumns()
	writeDistinct(t, path, cols, 30000, 0, 10000, nil, false, 1<<20, false)
	ctx := context.Background()
	kept, want := readLent(t, path, 4096)
	defer releaseBatches(kept)
	defer releaseBatches(want)
	for range 5 {
		again, _, err := readBatches(ctx, path, false, 4096, false)
		if err != nil {
			t.Fatal(err)
		}
		releaseBatches(again)
	}
	if err := sameBatches(kept, want); err != nil {
		t.Fatal(err)
	}
}

// TestLentDictionaryNotShared reads a chunk whose dictionary indices count
// up, then count up again over entries already taken: no two batches are
// to share a value's bytes, so that writing to one batch's values (as a
// user may, in place) leaves every other batch as arrow-go reads it.
func TestLentDictionaryNotShared(t *testing.T) {
	path := filepath.Join(t.TempDir(), "again.parquet")
	cols := distinctColumns()[:2] // i32, i64
	writeDistinct(t, path, cols, 20000, 1, 20000, nil, false, 1<<20, false)
	got, want := readLent(t, path, 1000)
	defer releaseBatches(got)
	defer releaseBatches(want)
	for i, b := range got {
		for _, c := range b.Columns() {
			buf := c.Data().Buffers()[1].Bytes()
			for k := range buf {
				buf[k] ^= 0xff
			}
		}
		if err := sameBatches(got[i+1:], want[i+1:]); err != nil {
			t.Fatalf("after writing to batch %d: %v", i, err)
		}
	}
}

// TestLentOnlyRuntimeMemory: with an allocator that does not say its
// memory is the runtime's (a checked one, here), every buffer is its own,
// none lent, and the values are the same.
func TestLentOnlyRuntimeMemory(t *testing.T) {
	path := filepath.Join(t.TempDir(), "distinct.parquet")
	writeDistinct(t, path, distinctColumns(), 20000, 0, 9000, nil, false, 1<<20, false)
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	before := parquet.LentBatches()
	got := readWith(t, path, 4096, mem)
	if n := parquet.LentBatches() - before; n != 0 {
		t.Errorf("%d batches lent with a checked allocator", n)
	}
	want, _, err := readBatches(context.Background(), path, true, 4096, false)
	if err != nil {
		t.Fatal(err)
	}
	defer releaseBatches(want)
	if err := sameBatches(got, want); err != nil {
		t.Error(err)
	}
	releaseBatches(got)
	mem.AssertSize(t, 0)
}

// pipelineChecked is runtimeChecked whose batches the reader's caller
// releases before reading anything after (unzeroed.Return), as a shuffled
// read's recycler does with its decoded windows.
type pipelineChecked struct{ runtimeChecked }

func (pipelineChecked) PipelineOnly() bool { return true }

// readWith reads every row of path in batches of batch rows into mem.
func readWith(t *testing.T, path string, batch int, mem memory.Allocator) []arrow.RecordBatch {
	t.Helper()
	got, err := readInto(context.Background(), path, parquet.Format{}, batch, mem)
	if err != nil {
		releaseBatches(got)
		t.Fatal(err)
	}
	return got
}

// TestLentPagesReturned: where the batches are the pipeline's alone, the
// dictionary pages (and compacted byte-array entries) lent to them go back
// to the pool once the last batch made of each is released, not before:
// batches kept across later reads, which take pooled buffers, keep their
// values, and once released, every page is back.
func TestLentPagesReturned(t *testing.T) {
	path := filepath.Join(t.TempDir(), "distinct.parquet")
	writeDistinct(t, path, distinctColumns(), 30000, 0, 10000, nil, false, 1<<20, false)
	ctx := context.Background()
	want, _, err := readBatches(ctx, path, true, 4096, false)
	if err != nil {
		t.Fatal(err)
	}
	defer releaseBatches(want)
	checked := memory.NewCheckedAllocator(memory.NewGoAllocator())
	mem := pipelineChecked{runtimeChecked{checked}}
	pages, lent := parquet.LentPagesOut(), parquet.LentBatches()
	kept := readWith(t, path, 4096, mem)
	if parquet.LentBatches() == lent {
		releaseBatches(kept)
		t.Fatal("no batch was built of dictionary bytes")
	}
	if parquet.LentPagesOut() == pages {
		t.Error("the kept batches hold no lent page")
	}
	for range 5 {
		releaseBatches(readWith(t, path, 4096, mem))
		releaseBatches(readWith(t, path, 1000, mem))
	}
	err = sameBatches(kept, want)
	releaseBatches(kept)
	if err != nil {
		t.Fatal(err)
	}
	if n := parquet.LentPagesOut() - pages; n != 0 {
		t.Errorf("%d lent pages not back in the pool after every batch was released", n)
	}
	if n := checked.CurrentAlloc(); n != 0 {
		t.Errorf("%d bytes of the allocator's outstanding", n)
	}
}
