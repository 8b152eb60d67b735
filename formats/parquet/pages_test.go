package parquet_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	pq "github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"

	"github.com/sluicedata/sluice/formats"
	"github.com/sluicedata/sluice/internal/testkit/sample"
	"github.com/sluicedata/sluice/storage"
)

// writePaged writes one row group of n rows with small pages, with or
// without a page index: an int64 id, a dictionary-encoded string with
// nulls, a plain float and a list of int32s.
func writePaged(t testing.TB, path string, n int, pageIndex bool) {
	t.Helper()
	mem := memory.NewGoAllocator()
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "x", Type: arrow.PrimitiveTypes.Float64},
		{Name: "l", Type: arrow.ListOf(arrow.PrimitiveTypes.Int32), Nullable: true},
	}, nil)
	b := array.NewRecordBuilder(mem, schema)
	defer b.Release()
	r := rand.New(rand.NewPCG(1, 2))
	for i := range n {
		b.Field(0).(*array.Int64Builder).Append(int64(i))
		if i%7 == 3 {
			b.Field(1).AppendNull()
		} else {
			b.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("v%d", i%50))
		}
		b.Field(2).(*array.Float64Builder).Append(r.Float64())
		lb := b.Field(3).(*array.ListBuilder)
		if i%11 == 5 {
			lb.AppendNull()
		} else {
			lb.Append(true)
			for k := range i % 4 {
				lb.ValueBuilder().(*array.Int32Builder).Append(int32(i + k))
			}
		}
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	writeRecord(t, path, rec, pq.NewWriterProperties(
		pq.WithMaxRowGroupLength(int64(n)),
		pq.WithDataPageSize(2<<10),
		pq.WithBatchSize(256), // pages of about DataPageSize
		pq.WithCompression(compress.Codecs.Snappy),
		pq.WithPageIndexEnabled(pageIndex),
		pq.WithDictionaryFor("s", true),
		pq.WithDictionaryFor("x", false),
		pq.WithDictionaryFor("id", false),
	))
}

// rowsOf reads rows [lo, hi) and renders them, counting the bytes fetched.
func rowsOf(t *testing.T, path string, lo, hi int64, mem memory.Allocator) ([]string, int64) {
	t.Helper()
	var read atomic.Int64
	opts := formats.PlanOptions{Storage: storage.Options{Wrap: func(b storage.Bucket) storage.Bucket {
		c := storage.NewCounting(b)
		c.OnRead = func(_ string, _ int64, n int) { read.Add(int64(n)) }
		return c
	}}}
	ds, err := planParquet(context.Background(), []string{path}, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	footer := read.Load()
	var out []string
	err = ds.Read(context.Background(), 0, ds.RowRange(0, lo, hi), 300, mem, func(b arrow.RecordBatch) error {
		defer b.Release()
		for i := range int(b.NumRows()) {
			row := ""
			for c := range int(b.NumCols()) {
				row += b.Column(c).ValueStr(i) + "|"
			}
			out = append(out, row)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("rows [%d, %d): %v", lo, hi, err)
	}
	return out, read.Load() - footer
}

// A range inside a row group of a file with a page index reads the rows a
// whole read gives there, and fetches about its share of the bytes.
func TestPagesOfACutRowGroup(t *testing.T) {
	const n = 20000
	dir := t.TempDir()
	paged, plain := filepath.Join(dir, "paged.parquet"), filepath.Join(dir, "plain.parquet")
	writePaged(t, paged, n, true)
	writePaged(t, plain, n, false)
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)

	want, whole := rowsOf(t, plain, 0, n, mem)
	md := footer(t, paged)
	list, err := md.RowGroup(0).ColumnChunk(3)
	if err != nil {
		t.Fatal(err)
	}
	listBytes := list.TotalCompressedSize()
	r := rand.New(rand.NewPCG(5, 6))
	cases := [][2]int64{{0, 1}, {n - 1, n}, {0, n / 2}, {n / 2, n}, {1234, 1235}, {4000, 4100}}
	for range sample.Count(30, 8) {
		lo := r.Int64N(n)
		cases = append(cases, [2]int64{lo, lo + 1 + r.Int64N(n-lo)})
	}
	for _, c := range cases {
		lo, hi := c[0], c[1]
		got, bytes := rowsOf(t, paged, lo, hi, mem)
		if len(got) != int(hi-lo) {
			t.Fatalf("rows [%d, %d): %d rows", lo, hi, len(got))
		}
		for i := range got {
			if got[i] != want[lo+int64(i)] {
				t.Fatalf("rows [%d, %d): row %d is %q, want %q", lo, hi, lo+int64(i), got[i], want[lo+int64(i)])
			}
		}
		// Its share of the bytes of the columns read by page, plus a page
		// per column at each end, the dictionary, the offset index and
		// the whole list column (repeated columns are read whole).
		share := (whole - listBytes) * (hi - lo) / n
		if limit := share + listBytes + 24<<10; bytes > limit {
			t.Errorf("rows [%d, %d) fetched %d bytes, more than %d (the whole row group is %d)", lo, hi, bytes, limit, whole)
		}
	}
	// Without a page index a walk of the page headers finds the pages
	// (walk_test.go): the list column and some of the others' pages.
	if got, bytes := rowsOf(t, plain, 4000, 4100, mem); bytes > listBytes+(whole-listBytes)/2 || !slices.Equal(got, want[4000:4100]) {
		t.Errorf("without a page index rows [4000, 4100) fetched %d bytes of the row group's %d", bytes, whole)
	}
}
