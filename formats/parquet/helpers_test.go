package parquet_test

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
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/metadata"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/sluicedata/sluice/formats"
	"github.com/sluicedata/sluice/formats/parquet"
	"github.com/sluicedata/sluice/internal/testkit/synth"
)

// writeSynth writes a synth dataset into a fresh directory and returns it.
func writeSynth(t testing.TB, spec synth.Spec) string {
	t.Helper()
	dir := t.TempDir()
	if err := synth.WriteDir(dir, spec); err != nil {
		t.Fatal(err)
	}
	return dir
}

// writeColumns writes one Parquet file at path holding the given columns
// (all of one length) in row groups of rowGroupRows rows.
func writeColumns(t testing.TB, path string, rowGroupRows int64, fields []arrow.Field, cols []arrow.Array) {
	t.Helper()
	schema := arrow.NewSchema(fields, nil)
	rec := array.NewRecordBatch(schema, cols, int64(cols[0].Len()))
	defer rec.Release()
	tbl := array.NewTableFromRecords(schema, []arrow.RecordBatch{rec})
	defer tbl.Release()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	props := pq.NewWriterProperties(pq.WithMaxRowGroupLength(rowGroupRows))
	if err := pqarrow.WriteTable(tbl, f, rowGroupRows, props, pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema())); err != nil {
		t.Fatal(err)
	}
}

// writeRecord writes rec as one Parquet file at path with props.
func writeRecord(t testing.TB, path string, rec arrow.RecordBatch, props *pq.WriterProperties) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w, err := pqarrow.NewFileWriter(rec.Schema(), f, props, pqarrow.DefaultWriterProps())
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

// footer parses a local Parquet file's footer with arrow-go directly, as the
// reference the plan is checked against.
func footer(t testing.TB, path string) *metadata.FileMetaData {
	t.Helper()
	pf, err := file.OpenParquetFile(path, false)
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	return pf.MetaData()
}

// readIDs reads rows [lo, hi) of fragment i and returns the id column,
// checking that no batch exceeds batchRows rows and that every batch has
// the dataset's schema.
func readIDs(t testing.TB, ds *formats.Scan, i int, lo, hi int64, batchRows int, mem memory.Allocator) ([]int64, error) {
	t.Helper()
	col := -1
	for c, name := range ds.Columns {
		if name == "id" {
			col = c
		}
	}
	if col < 0 {
		t.Fatalf("dataset has no id column: %v", ds.Columns)
	}
	var ids []int64
	err := ds.Read(context.Background(), i, ds.RowRange(i, lo, hi), batchRows, mem, func(b arrow.RecordBatch) error {
		defer b.Release()
		if b.NumRows() > int64(batchRows) {
			return fmt.Errorf("batch of %d rows, asked for at most %d", b.NumRows(), batchRows)
		}
		if b.NumRows() == 0 {
			return fmt.Errorf("empty batch")
		}
		if !b.Schema().Equal(ds.Schema) {
			return fmt.Errorf("batch schema %s, dataset schema %s", b.Schema(), ds.Schema)
		}
		ids = append(ids, b.Column(col).(*array.Int64).Int64Values()...)
		return nil
	})
	return ids, err
}

func base(p string) string { return filepath.Base(p) }

// planParquet plans with the Parquet driver, as a user of this package does.
func planParquet(ctx context.Context, urls []string, opts formats.PlanOptions) (*formats.Scan, error) {
	if opts.Formats == nil {
		opts.Formats = []formats.Format{parquet.Format{}}
	}
	return formats.Plan(ctx, urls, opts)
}
