package parquet

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	pq "github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/sluicedata/sluice/formats"
	"github.com/sluicedata/sluice/formats/parquet/internal/thrift"
)

// TestFastDecodeCorruptPage damages a page that flatdecode takes on (its
// header is sound, its dictionary indices claim 40 bits) and checks that
// the read fails naming the file, the row group, the column, the page and
// its byte offset; a read of part of the row group (its pages fetched by
// the offset index, read from those alone) fails the same way.
func TestFastDecodeCorruptPage(t *testing.T) {
	path := filepath.Join(t.TempDir(), "dict.parquet")
	b := array.NewInt64Builder(memory.DefaultAllocator)
	for i := range 1000 {
		b.Append(int64(i % 10))
	}
	col := b.NewArray()
	b.Release()
	schema := arrow.NewSchema([]arrow.Field{{Name: "v", Type: arrow.PrimitiveTypes.Int64}}, nil)
	rec := array.NewRecordBatch(schema, []arrow.Array{col}, 1000)
	col.Release()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w, err := pqarrow.NewFileWriter(schema, f, pq.NewWriterProperties(pq.WithDictionaryDefault(true), pq.WithDataPageSize(64), pq.WithBatchSize(50), pq.WithPageIndexEnabled(true)), pqarrow.DefaultWriterProps())
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	rec.Release()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	pf, err := file.OpenParquetFile(path, false)
	if err != nil {
		t.Fatal(err)
	}
	cc, err := pf.MetaData().RowGroup(0).ColumnChunk(0)
	if err != nil {
		t.Fatal(err)
	}
	at := cc.DataPageOffset()
	pf.Close()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	h, err := thrift.ParsePageHeader(data[at:])
	if err != nil || h.Type != thrift.PageData {
		t.Fatalf("no data page at %d: %v", at, err)
	}
	data[at+int64(h.Size)] = 40 // the indices' bit width
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}

	lo, hi := int64(0), int64(1000)
	read := func(arrowGo bool) error {
		ds, err := formats.Plan(context.Background(), []string{path}, formats.PlanOptions{Formats: []formats.Format{Format{ArrowGoDecode: arrowGo}}})
		if err != nil {
			return err
		}
		defer ds.Close()
		return ds.Read(context.Background(), 0, ds.RowRange(0, lo, hi), 100, nil, func(b arrow.RecordBatch) error {
			b.Release()
			return nil
		})
	}
	before := fastChunks.Load()
	err = read(false)
	if fastChunks.Load() == before {
		t.Fatal("the chunk was not flatdecode's")
	}
	want := fmt.Sprintf(`row group 0: corrupt or unreadable file: column "v": page 1 at byte %d: dictionary indices without a bit width of at most 32`, at)
	if err == nil || !errors.Is(err, formats.ErrCorrupt) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), path) {
		t.Fatalf("err = %v\nwant ErrCorrupt naming the file and saying %q", err, want)
	}
	if err := read(true); err == nil {
		t.Error("arrow-go reads the damaged page")
	}
	// Read in part, from the pages fetched alone: the same error.
	lo, hi = 1, 20
	before = pagedChunks.Load()
	err = read(false)
	if pagedChunks.Load() == before {
		t.Fatalf("the cut read's pages were not flatdecode's: %v", err)
	}
	if err == nil || !errors.Is(err, formats.ErrCorrupt) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), path) {
		t.Fatalf("cut read: err = %v\nwant ErrCorrupt naming the file and saying %q", err, want)
	}
}
