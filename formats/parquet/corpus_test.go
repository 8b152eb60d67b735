package parquet_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"

	"github.com/sluicedata/sluice/formats"
	"github.com/sluicedata/sluice/internal/testkit/corpus"
)

// corpusSkip lists files left out on purpose, with the reason.
var corpusSkip = map[string]string{
	// 4 KB of Brotli that expands to a column chunk over 2 GB: reading it
	// proves only that the machine has the memory, and takes minutes.
	"large_string_map.brotli.parquet": "expands to more than 2 GB",
}

// readAll plans path alone, reads every row of every fragment with all
// columns and checks that the rows delivered match the footer's count. It
// also reads the middle third of each fragment and checks that those rows
// equal the same rows of the whole read (which exercises seeking inside row
// groups on every kind of column). leaked is the Arrow memory left
// outstanding.
func readAll(ctx context.Context, path string) (rows int64, leaked int, err error) {
	ds, err := planParquet(ctx, []string{path}, formats.PlanOptions{})
	if err != nil {
		return 0, 0, err
	}
	defer ds.Close()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer func() { leaked = mem.CurrentAlloc() }()
	for i, f := range ds.Fragments {
		whole, err := readColumns(ctx, ds, i, 0, f.Rows, mem)
		if err != nil {
			return rows, 0, err
		}
		defer release(whole)
		if n := colLen(whole); n != f.Rows {
			return rows, 0, fmt.Errorf("%s: read %d rows, footer says %d", f.URL, n, f.Rows)
		}
		rows += f.Rows
		lo, hi := f.Rows/3, 2*f.Rows/3
		mid, err := readColumns(ctx, ds, i, lo, hi, mem)
		if err != nil {
			return rows, 0, fmt.Errorf("rows [%d, %d) after a whole read succeeded: %w", lo, hi, err)
		}
		defer release(mid)
		for c := range whole {
			// Exact equality, except that NaN equals NaN.
			if !array.SliceApproxEqual(whole[c], lo, hi, mid[c], 0, hi-lo, array.WithNaNsEqual(true), array.WithAbsTolerance(0)) {
				return rows, 0, fmt.Errorf("%s: column %q: rows [%d, %d) read alone differ from the same rows of the whole file", f.URL, ds.Columns[c], lo, hi)
			}
		}
	}
	return rows, 0, nil
}

// readColumns reads rows [lo, hi) of fragment i and concatenates each column.
func readColumns(ctx context.Context, ds *formats.Scan, i int, lo, hi int64, mem memory.Allocator) ([]arrow.Array, error) {
	var batches []arrow.RecordBatch
	defer func() {
		for _, b := range batches {
			b.Release()
		}
	}()
	err := ds.Read(ctx, i, ds.RowRange(i, lo, hi), 4096, mem, func(b arrow.RecordBatch) error {
		batches = append(batches, b)
		if !b.Schema().Equal(ds.Schema) {
			return fmt.Errorf("batch schema %s, dataset schema %s", b.Schema(), ds.Schema)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	cols := make([]arrow.Array, len(ds.Columns))
	for c := range cols {
		parts := make([]arrow.Array, len(batches))
		for j, b := range batches {
			parts[j] = b.Column(c)
		}
		if len(parts) == 0 {
			cols[c] = array.MakeArrayOfNull(mem, ds.Schema.Field(c).Type, 0)
			continue
		}
		col, err := array.Concatenate(parts, mem)
		if err != nil {
			release(cols)
			return nil, err
		}
		cols[c] = col
	}
	return cols, nil
}

func colLen(cols []arrow.Array) int64 {
	if len(cols) == 0 {
		return 0
	}
	return int64(cols[0].Len())
}

func release(arrs []arrow.Array) {
	for _, a := range arrs {
		if a != nil {
			a.Release()
		}
	}
}

// usesDelta reports whether any column chunk of the file at path is DELTA
// encoded: arrow-go's DELTA_BINARY_PACKED decoder (also under the DELTA byte
// array encodings) allocates a buffer it never frees, so reading such a file
// leaves Arrow memory outstanding whatever formats does. With Go's allocator
// the garbage collector reclaims it.
func usesDelta(t *testing.T, path string) bool {
	t.Helper()
	pf, err := file.OpenParquetFile(path, false)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	defer pf.Close()
	md := pf.MetaData()
	for i := range md.NumRowGroups() {
		rg := md.RowGroup(i)
		for c := range rg.NumColumns() {
			cc, err := rg.ColumnChunk(c)
			if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			for _, e := range cc.Encodings() {
				switch e {
				case parquet.Encodings.DeltaBinaryPacked, parquet.Encodings.DeltaByteArray, parquet.Encodings.DeltaLengthByteArray:
					return true
				}
			}
		}
	}
	return false
}

// withDeadline runs fn on its own goroutine so that a hang fails the test by
// name instead of stalling the whole run until the test binary times out.
// d is several times what a quiet machine takes; the deadline is five times
// d, as a 2-core machine busy with other builds and the race detector ran
// the 60 s cases past a minute (a hang never ends, so the margin costs
// only the wait for one).
func withDeadline(t *testing.T, name string, d time.Duration, fn func(ctx context.Context) error) error {
	t.Helper()
	d *= 5
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- fn(ctx) }()
	select {
	case err := <-done:
		return err
	case <-time.After(d + 5*time.Second):
		t.Fatalf("%s: no result after %s: reading hangs", name, d)
		return nil
	}
}

// TestParquetTestingCorpus reads every file of apache/parquet-testing,
// including the malformed ones: each is read in full or refused with an error
// naming it; none may panic, hang or deliver a wrong row count.
func TestParquetTestingCorpus(t *testing.T) {
	sharedTestdata := corpus.Dir(t)
	root := filepath.Join(sharedTestdata, "parquet-testing")
	if _, err := os.Stat(root); err != nil {
		t.Fatalf("parquet-testing corpus not found at %s (shared/ belongs beside the repository): %v", root, err)
	}
	var files []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && (strings.HasSuffix(p, ".parquet") || strings.HasSuffix(p, ".parquet.encrypted")) {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 100 {
		t.Fatalf("found only %d Parquet files under %s: is the corpus complete?", len(files), root)
	}
	var ok, refused, skipped int
	var refusals []string
	for _, p := range files {
		name := filepath.Base(p)
		if why, skip := corpusSkip[name]; skip {
			skipped++
			t.Logf("skip %s: %s", p, why)
			continue
		}
		var (
			rows   int64
			leaked int
		)
		err := withDeadline(t, p, 20*time.Second, func(ctx context.Context) error {
			var err error
			rows, leaked, err = readAll(ctx, p)
			return err
		})
		encrypted := strings.HasSuffix(name, ".encrypted")
		switch {
		case err == nil && encrypted:
			t.Errorf("%s: encrypted, yet read without keys", p)
		case err == nil:
			ok++
			if leaked != 0 && !usesDelta(t, p) {
				t.Errorf("%s: %d bytes of Arrow memory outstanding after reading", p, leaked)
			}
		case errors.Is(err, context.DeadlineExceeded):
			t.Errorf("%s: timed out after reading %d rows: %v", p, rows, err)
		case !strings.Contains(err.Error(), name):
			t.Errorf("%s: error does not name the file: %v", p, err)
		case !errors.Is(err, formats.ErrCorrupt):
			t.Errorf("%s: error does not wrap ErrCorrupt: %v", p, err)
		default:
			refused++
			refusals = append(refusals, fmt.Sprintf("%s: %s", strings.TrimPrefix(p, root+"/"), firstLine(err.Error())))
		}
	}
	t.Logf("parquet-testing: %d read in full, %d refused, %d skipped", ok, refused, skipped)
	for _, r := range refusals {
		t.Logf("refused %s", r)
	}
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
