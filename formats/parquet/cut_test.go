package parquet_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	pq "github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"

	"github.com/sluicedata/sluice/formats"
	"github.com/sluicedata/sluice/formats/parquet"
	"github.com/sluicedata/sluice/internal/testkit/sample"
)

// readRange reads file rows [lo, hi) of path's one fragment.
func readRange(ctx context.Context, path string, arrowGo bool, batchRows int, lo, hi int64) ([]arrow.RecordBatch, *memory.CheckedAllocator, error) {
	return readFormatRange(ctx, path, parquet.Format{ArrowGoDecode: arrowGo}, batchRows, lo, hi)
}

// readFormatRange reads file rows [lo, hi) of path's one fragment with p.
func readFormatRange(ctx context.Context, path string, p parquet.Format, batchRows int, lo, hi int64) ([]arrow.RecordBatch, *memory.CheckedAllocator, error) {
	ds, err := formats.Plan(ctx, []string{path}, formats.PlanOptions{Formats: []formats.Format{p}})
	if err != nil {
		return nil, nil, err
	}
	defer ds.Close()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	var batches []arrow.RecordBatch
	err = ds.Read(ctx, 0, ds.RowRange(0, lo, hi), batchRows, mem, func(b arrow.RecordBatch) error {
		batches = append(batches, b)
		return nil
	})
	return batches, mem, err
}

// TestFastDecodeCut compares the own decoder with arrow-go's on cut reads
// (rows [lo, hi) of a row group, fetched page by page and read from the
// fetched pages alone) in every encoding, codec, page version and
// nullability, at page boundaries, a row either side of them, and
// anywhere.
func TestFastDecodeCut(t *testing.T) {
	dir := t.TempDir()
	all := genColumns()
	codecs := []compress.Compression{compress.Codecs.Uncompressed, compress.Codecs.Snappy}
	encs := []pq.Encoding{pq.Encodings.Plain, pq.Encodings.RLEDict, pq.Encodings.DeltaBinaryPacked, pq.Encodings.ByteStreamSplit, pq.Encodings.RLE, pq.Encodings.DeltaLengthByteArray, pq.Encodings.DeltaByteArray}
	ranges, taken := 0, int64(0)
	for fi, enc := range encs {
		var cols []genColumn
		for _, c := range all {
			if slices.Contains(c.encs, enc) {
				cols = append(cols, c)
			}
		}
		for ci, codec := range codecs {
			for nulls := range 3 {
				if testing.Short() && nulls != fi%3 {
					// One nullability per encoding under -short, in both
					// codecs and so both page versions; the encodings
					// take the three in turn.
					continue
				}
				v2 := (fi+ci+nulls)%2 == 1
				name := fmt.Sprintf("cut_%s_%s_nulls%d_v2%v.parquet", enc, codec, nulls, v2)
				path := filepath.Join(dir, name)
				const rows = 4000
				writeGenerated(t, path, cols, enc, codec, nulls, v2, rows)
				starts := pageStarts(t, path)
				delta := usesDelta(t, path) // arrow-go's decoder of them leaks
				r := rand.New(rand.NewPCG(uint64(fi), uint64(ci*3+nulls)))
				var cuts [][2]int64
				for range sample.Count(3, 1) {
					s := starts[1+r.IntN(len(starts)-1)]
					e := starts[r.IntN(len(starts))]
					for _, d := range [][2]int64{{0, 0}, {-1, 1}, {1, -1}, {0, 1}} {
						lo, hi := min(s, e)+d[0], max(s, e)+d[1]
						if lo >= 0 && hi <= rows && lo < hi {
							cuts = append(cuts, [2]int64{lo, hi})
						}
					}
					lo := r.Int64N(rows)
					cuts = append(cuts, [2]int64{lo, lo + 1 + r.Int64N(min(rows-lo, 300))})
				}
				for _, c := range cuts {
					batchRows := []int{1, 64, 700}[r.IntN(3)]
					if testing.Short() && batchRows == 1 {
						// A cut can be the whole file: thousands of
						// batches of one row, decoded twice, were most
						// of the test's time under the race detector.
						batchRows = 64
					}
					err := withDeadline(t, path, 60*time.Second, func(ctx context.Context) error {
						before := parquet.PagedChunks()
						fast, fmem, ferr := readRange(ctx, path, false, batchRows, c[0], c[1])
						defer releaseBatches(fast)
						taken += parquet.PagedChunks() - before
						slow, _, serr := readRange(ctx, path, true, batchRows, c[0], c[1])
						defer releaseBatches(slow)
						if ferr != nil || serr != nil {
							return fmt.Errorf("own decoder: %v; arrow-go: %v", ferr, serr)
						}
						if err := sameBatches(fast, slow); err != nil {
							return err
						}
						releaseBatches(fast)
						fast = nil
						if n := fmem.CurrentAlloc(); n != 0 && !delta {
							return fmt.Errorf("%d bytes of Arrow memory outstanding", n)
						}
						return nil
					})
					if err != nil {
						t.Errorf("%s rows [%d, %d) in batches of %d: %v", name, c[0], c[1], batchRows, err)
					}
					ranges++
				}
			}
		}
	}
	t.Logf("%d cut reads compared, %d column chunks read by the own decoder from the pages fetched", ranges, taken)
	if taken == 0 {
		t.Error("no cut read took the own decoder")
	}
}
