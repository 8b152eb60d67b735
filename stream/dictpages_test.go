package stream

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	pq "github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/sluicedata/sluice/formats"
	"github.com/sluicedata/sluice/formats/parquet"
	"github.com/sluicedata/sluice/storage"
)

// Two ranks reading one row group without a page index, written as pyarrow
// writes (dictionaries that fall back to PLAIN pages once full), cut
// between them by their split boundary: the second rank's fetch starts
// past the fallback of id, u and x, and leaves their dictionary pages out,
// so that the ranks fetch exactly those pages' bytes fewer than where the
// dictionaries are fetched (arrow-go's decoder, which needs them), with
// every value delivered the same.
func TestIOAmplificationPastDictionaryFallback(t *testing.T) {
	const n = 120_000
	dir := t.TempDir()
	path := filepath.Join(dir, "fallback.parquet")
	writeDictionaryFallback(t, path, n)
	// The dictionaries a fetch past the fallback leaves out: of every
	// column but label, whose pages all take it.
	fr, err := file.OpenParquetFile(path, false)
	if err != nil {
		t.Fatal(err)
	}
	var dicts int64
	g := fr.MetaData().RowGroup(0)
	for c := range g.NumColumns() {
		cc, err := g.ColumnChunk(c)
		if err != nil {
			t.Fatal(err)
		}
		if !cc.HasDictionaryPage() {
			t.Fatalf("column %d has no dictionary", c)
		}
		if fr.MetaData().Schema.Column(c).Name() != "label" {
			dicts += cc.DataPageOffset() - cc.DictionaryPageOffset()
		}
	}
	fr.Close()

	read := func(format parquet.Format) int64 {
		var read int64
		var ids []int64
		for rank := range 2 {
			log := &readLog{}
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			ds := open(t, Options{URLs: []string{dir}, BatchSize: 1000, NumSplits: 2, WorldSize: 2, Rank: rank, Allocator: mem,
				Formats: []formats.Format{format}, Storage: storage.Options{Wrap: log.wrap}})
			if ov := ds.Overlap(); ov.CutUnits != 1 || ov.PagedUnits != 1 {
				t.Fatalf("overlap %+v: the row group is not cut and read by pages", ov)
			}
			log.start()
			for b, err := range ds.Batches(context.Background()) {
				if err != nil {
					t.Fatal(err)
				}
				ids = append(ids, checkFallbackRows(t, b)...)
				b.Release()
			}
			read += log.bytes()
			ds.Close()
			mem.AssertSize(t, 0)
		}
		exactlyOnce(t, ids, n)
		return read
	}
	own, arrowGo := read(parquet.Format{}), read(parquet.Format{ArrowGoDecode: true})
	t.Logf("%d bytes fetched with the own decoder, %d with arrow-go's: %d fewer, the dictionaries past the fallback %d", own, arrowGo, arrowGo-own, dicts)
	if arrowGo-own != dicts {
		t.Errorf("the ranks fetched %d bytes, %d fewer than with arrow-go's decoder; want %d fewer (the dictionaries of id, u and x)", own, arrowGo-own, dicts)
	}
}

// writeDictionaryFallback writes n rows in one row group of 8 KiB pages
// and no page index, dictionaries on and bounded at 16 KiB: id, u (its
// string) and x (half of it) fall back to PLAIN pages after their first
// pages, label (id mod 10) does not.
func writeDictionaryFallback(t *testing.T, path string, n int) {
	t.Helper()
	mem := memory.NewGoAllocator()
	ids, us, xs, labels := array.NewInt64Builder(mem), array.NewStringBuilder(mem), array.NewFloat64Builder(mem), array.NewInt64Builder(mem)
	for i := range n {
		ids.Append(int64(i))
		us.Append(fmt.Sprintf("u-%d", i))
		xs.Append(float64(i) / 2)
		labels.Append(int64(i % 10))
	}
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "u", Type: arrow.BinaryTypes.String},
		{Name: "x", Type: arrow.PrimitiveTypes.Float64},
		{Name: "label", Type: arrow.PrimitiveTypes.Int64},
	}, nil)
	cols := []arrow.Array{ids.NewArray(), us.NewArray(), xs.NewArray(), labels.NewArray()}
	rec := array.NewRecordBatch(schema, cols, int64(n))
	for _, c := range cols {
		c.Release()
	}
	defer rec.Release()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	props := pq.NewWriterProperties(pq.WithMaxRowGroupLength(int64(n)), pq.WithDataPageSize(8<<10), pq.WithBatchSize(512),
		pq.WithCompression(compress.Codecs.Snappy), pq.WithDictionaryPageSizeLimit(16<<10))
	w, err := pqarrow.NewFileWriter(schema, f, props, pqarrow.DefaultWriterProps())
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// checkFallbackRows checks every value of a batch of writeDictionaryFallback's
// rows against its id, and returns the ids.
func checkFallbackRows(t *testing.T, b arrow.RecordBatch) []int64 {
	t.Helper()
	col := func(name string) arrow.Array {
		idx := b.Schema().FieldIndices(name)
		if len(idx) != 1 {
			t.Fatalf("no column %q in %s", name, b.Schema())
		}
		return b.Column(idx[0])
	}
	ids, us, xs, labels := col("id").(*array.Int64), col("u").(*array.String), col("x").(*array.Float64), col("label").(*array.Int64)
	out := make([]int64, ids.Len())
	for i := range ids.Len() {
		id := ids.Value(i)
		if us.Value(i) != fmt.Sprintf("u-%d", id) || xs.Value(i) != float64(id)/2 || labels.Value(i) != id%10 || ids.IsNull(i) {
			t.Fatalf("row of id %d: u %q, x %v, label %d", id, us.Value(i), xs.Value(i), labels.Value(i))
		}
		out[i] = id
	}
	return out
}
