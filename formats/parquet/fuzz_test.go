package parquet_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"gocloud.dev/blob"
	"gocloud.dev/blob/memblob"

	"github.com/sluicedata/sluice/formats"
	"github.com/sluicedata/sluice/formats/parquet"
	"github.com/sluicedata/sluice/internal/testkit/corpus"
	"github.com/sluicedata/sluice/internal/testkit/synth"
	"github.com/sluicedata/sluice/storage"
)

// FuzzParquetFooter plans and reads arbitrary bytes as a Parquet file from a
// mem bucket. Whatever the bytes, Plan and Read must return (no panic, no
// hang), any error must name the file, and a read that succeeds must deliver
// exactly the rows asked for.
func FuzzParquetFooter(f *testing.F) {
	for _, spec := range []synth.Spec{
		{Files: 1, RowsPerFile: 5, RowGroupRows: 2, StringBytes: 3},
		{Files: 1, RowsPerFile: 3, StringBytes: 1, Seed: 1},
		{Files: 1, RowsPerFile: 8, RowGroupRows: 3, SortedLabels: true, Classes: 2, StringBytes: 2},
		// A page index, so that reading half the row group goes page by
		// page through an offset index the fuzzer mutates.
		{Files: 1, RowsPerFile: 2500, RowGroupRows: 2500, StringBytes: 1, PageIndex: true},
	} {
		dir := f.TempDir()
		if err := synth.WriteDir(dir, spec); err != nil {
			f.Fatal(err)
		}
		data, err := os.ReadFile(filepath.Join(dir, synth.FileName(0)))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	// Small files written by other tools, when the corpus is there: nested
	// types, other encodings and codecs, and the malformed ones.
	sharedTestdata, _ := corpus.Lookup(f)
	for _, pattern := range []string{"data/*.parquet", "bad_data/*.parquet"} {
		paths, _ := filepath.Glob(filepath.Join(sharedTestdata, "parquet-testing", pattern))
		for _, p := range paths {
			if data, err := os.ReadFile(p); err == nil && len(data) <= 4096 {
				f.Add(data)
			}
		}
	}
	// FIXED_LEN_BYTE_ARRAY in DELTA_BYTE_ARRAY, which the own decoder
	// reads and arrow-go as BYTE_ARRAY (see readAs).
	// The same inside a struct and a list, which the driver refuses (see
	// fixedDelta).
	for _, p := range []string{flbaDeltaFile, flbaDeltaNestedFile} {
		if data, err := os.ReadFile(p); err == nil {
			f.Add(data)
		} else {
			f.Fatal(err)
		}
	}
	// Top-level columns of one name, which the driver renames (see
	// uniqueNames), and a chunk whose num_values ends it early.
	dup := filepath.Join(f.TempDir(), "dup.parquet")
	writeDuplicates(f, dup, []string{"id", "s", "id", "id_1", "s"}, true)
	if data, err := os.ReadFile(dup); err == nil {
		f.Add(data)
	} else {
		f.Fatal(err)
	}
	// A map whose key_value group is annotated MAP_KEY_VALUE and UNKNOWN,
	// as parquet-mr writes it (see dropUnknownLogicalTypes).
	hive := filepath.Join(f.TempDir(), "hive.parquet")
	hiveMapKeyValue(f, hive, true)
	if data, err := os.ReadFile(hive); err == nil {
		f.Add(data)
	} else {
		f.Fatal(err)
	}
	f.Add(parquet.PagedFile(f, 20))
	// Files built by hand: a chunk of FIXED_LEN_BYTE_ARRAY(16) that falls
	// back from a dictionary to DELTA_BYTE_ARRAY (only the own decoder
	// reads it), the deprecated LZ4 codec in each framing, empty groups.
	for _, write := range []func(testing.TB, string){
		func(t testing.TB, p string) { flbaMixedFile(t, p, true) },
		lz4File,
		emptyGroupFile,
	} {
		p := filepath.Join(f.TempDir(), "hand.parquet")
		write(f, p)
		if data, err := os.ReadFile(p); err == nil {
			f.Add(data)
		} else {
			f.Fatal(err)
		}
	}
	if data, err := os.ReadFile(optionalMetadataVariantFile); err == nil {
		f.Add(data) // a VARIANT read as a plain struct (see plainVariants)
	} else {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		const url = "mem://fuzz/f.parquet"
		err := withDeadline(t, url, 10*time.Second, func(ctx context.Context) error {
			return planAndReadBytes(ctx, url, data)
		})
		if errors.Is(err, errWrongRowCount) {
			t.Fatal(err)
		}
		if err != nil && !strings.Contains(err.Error(), url) {
			t.Fatalf("error does not name the file: %v", err)
		}
	})
}

var errWrongRowCount = errors.New("read succeeded with a wrong row count")

// fuzzRowCap bounds the rows a fuzz input may make Read decode: a footer can
// claim billions of rows that RLE data then delivers, legitimately, but
// slowly.
const fuzzRowCap = 1 << 16

func planAndReadBytes(ctx context.Context, url string, data []byte) error {
	b := memblob.OpenBucket(nil)
	if err := b.WriteAll(ctx, strings.TrimPrefix(url, "mem://fuzz/"), data, nil); err != nil {
		b.Close()
		return err
	}
	opts := formats.PlanOptions{Storage: storage.Options{Open: func(context.Context, string) (*blob.Bucket, error) { return b, nil }}}
	ds, err := planParquet(ctx, []string{url}, opts)
	if err != nil {
		return err
	}
	defer ds.Close()
	for i, f := range ds.Fragments {
		rows := min(f.Rows, fuzzRowCap)
		for _, r := range [][2]int64{{0, rows}, {rows / 2, rows}} {
			var got int64
			err := ds.Read(ctx, i, ds.RowRange(i, r[0], r[1]), 3, nil, func(rec arrow.RecordBatch) error {
				got += rec.NumRows()
				rec.Release()
				return nil
			})
			if err != nil {
				return err
			}
			if got != r[1]-r[0] {
				return fmt.Errorf("%w: rows [%d, %d) delivered %d rows", errWrongRowCount, r[0], r[1], got)
			}
		}
	}
	return nil
}

// FuzzReadRange reads arbitrary row ranges of a fixed synth dataset, in
// arbitrary batch sizes and column orders, and checks every id and label.
func FuzzReadRange(f *testing.F) {
	spec := synth.Spec{Files: 2, RowsPerFile: 700, RowGroupRows: 96, Seed: 9}
	dir := f.TempDir()
	if err := synth.WriteDir(dir, spec); err != nil {
		f.Fatal(err)
	}
	orders := [][]string{{"id", "label"}, {"label", "x", "id"}, {"s", "id", "label", "x"}}
	var datasets []*formats.Scan
	for _, cols := range orders {
		ds, err := planParquet(context.Background(), []string{dir}, formats.PlanOptions{Columns: cols})
		if err != nil {
			f.Fatal(err)
		}
		defer ds.Close()
		datasets = append(datasets, ds)
	}
	f.Add(uint32(0), uint32(700), uint16(8192), uint8(0))
	f.Add(uint32(95), uint32(2), uint16(1), uint8(1))
	f.Add(uint32(100), uint32(500), uint16(77), uint8(5))
	f.Add(uint32(699), uint32(1), uint16(3), uint8(2))
	f.Fuzz(func(t *testing.T, lo, n uint32, batch uint16, pick uint8) {
		rows := int64(spec.RowsPerFile)
		start := int64(lo) % (rows + 1)
		end := start + int64(n)%(rows-start+1)
		file := int(pick) % spec.Files
		ds := datasets[int(pick/2)%len(datasets)]
		batchRows := 1 + int(batch)%1000
		idCol, labelCol := -1, -1
		for c, name := range ds.Columns {
			switch name {
			case "id":
				idCol = c
			case "label":
				labelCol = c
			}
		}
		next := int64(file)*rows + start
		err := ds.Read(context.Background(), file, ds.RowRange(file, start, end), batchRows, nil, func(rec arrow.RecordBatch) error {
			defer rec.Release()
			if rec.NumRows() == 0 || rec.NumRows() > int64(batchRows) {
				return fmt.Errorf("batch of %d rows, asked for at most %d", rec.NumRows(), batchRows)
			}
			ids := rec.Column(idCol).(*array.Int64).Int64Values()
			labels := rec.Column(labelCol).(*array.Int64).Int64Values()
			for k, id := range ids {
				if id != next || labels[k] != spec.Label(id) {
					return fmt.Errorf("row with id %d label %d, want id %d label %d", id, labels[k], next, spec.Label(next))
				}
				next++
			}
			return nil
		})
		if err != nil {
			t.Fatalf("file %d rows [%d, %d) in batches of %d, columns %v: %v", file, start, end, batchRows, ds.Columns, err)
		}
		if want := int64(file)*rows + end; next != want {
			t.Fatalf("file %d rows [%d, %d): read up to id %d, want %d", file, start, end, next, want)
		}
	})
}
