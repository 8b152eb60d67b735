package parquet_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/compress"

	"github.com/sluicedata/sluice/formats"
	"github.com/sluicedata/sluice/formats/parquet"
)

// A fetch of part of a row group read as several parts at once (the
// windows of a large row group, as a stream reads them) gives every value
// a whole read gives, decompresses each fetched page once however many
// parts read a piece of it, and decodes a dictionary only for the parts
// whose pages are dictionary-encoded (u's dictionary overflows into PLAIN
// pages, as pyarrow's do past 1 MiB).
func TestPartsOfAFetchShareTheirPages(t *testing.T) {
	defer parquet.WalkAll()()
	const n = 6000
	cols := []string{"id", "s", "u", "x"}
	for _, v2 := range []bool{false, true} {
		for _, codec := range []compress.Compression{compress.Codecs.Snappy, compress.Codecs.Zstd} {
			t.Run(fmt.Sprintf("v2=%v/%s", v2, codec), func(t *testing.T) {
				path := filepath.Join(t.TempDir(), "f.parquet")
				writeNoIndex(t, path, n, n, v2, codec)
				mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
				defer mem.AssertSize(t, 0)
				whole, _, _ := countingPlan(t, path, nil, cols...)
				want := renderRows(t, whole, 0, n, mem)
				whole.Close()
				ds, _, _ := countingPlan(t, path, nil, cols...)
				defer ds.Close()
				lo, hi := int64(1), int64(n-1)
				// One decode of the fetch: each page it holds once.
				pages, dicts := parquet.PagesDecompressed(), parquet.DictionariesDecoded()
				if got := renderParts(t, ds, lo, hi, []int64{lo, hi}, mem); !slices.Equal(got, want[lo:hi]) {
					t.Fatalf("rows [%d, %d) read as one part differ from a whole read", lo, hi)
				}
				onePages, oneDicts := parquet.PagesDecompressed()-pages, parquet.DictionariesDecoded()-dicts
				// The same fetch in parts of 371 rows, cut inside pages.
				var cuts []int64
				for at := lo; at < hi; at += 371 {
					cuts = append(cuts, at)
				}
				cuts = append(cuts, hi)
				for round := range 3 {
					pages, dicts = parquet.PagesDecompressed(), parquet.DictionariesDecoded()
					if got := renderParts(t, ds, lo, hi, cuts, mem); !slices.Equal(got, want[lo:hi]) {
						t.Fatalf("round %d: rows [%d, %d) read in %d parts differ from a whole read", round, lo, hi, len(cuts)-1)
					}
					partPages, partDicts := parquet.PagesDecompressed()-pages, parquet.DictionariesDecoded()-dicts
					t.Logf("one part: %d pages decompressed, %d dictionaries; %d parts: %d pages, %d dictionaries", onePages, oneDicts, len(cuts)-1, partPages, partDicts)
					if onePages == 0 || partPages != onePages {
						t.Errorf("round %d: %d parts decompressed %d pages, one part %d", round, len(cuts)-1, partPages, onePages)
					}
					// s is dictionary-encoded throughout, u only in its
					// first pages: every part decodes s's.
					if parts := int64(len(cuts) - 1); partDicts < parts || partDicts >= 2*parts {
						t.Errorf("round %d: %d parts decoded %d dictionaries, want at least %d (s's) and fewer than %d (u's too)", round, parts, partDicts, parts, 2*parts)
					}
				}
			})
		}
	}
}

// renderParts fetches rows [lo, hi) of ds's one file at once and decodes
// the parts between cuts, all at the same time, each as a stream's
// window decodes its part of a fetch; it renders their rows in order.
func renderParts(t *testing.T, ds *formats.Scan, lo, hi int64, cuts []int64, mem memory.Allocator) []string {
	t.Helper()
	ctx := context.Background()
	fe, err := ds.Fetch(ctx, 0, ds.RowRange(0, lo, hi))
	if err != nil {
		t.Fatal(err)
	}
	out := make([][]string, len(cuts)-1)
	errs := make([]error, len(cuts)-1)
	var wg sync.WaitGroup
	for i := range len(cuts) - 1 {
		part, err := fe.Part(ds.RowRange(0, cuts[i], cuts[i+1]))
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			defer part.Release()
			_, errs[i] = ds.Decode(ctx, part, 100, mem, func(b arrow.RecordBatch) error {
				defer b.Release()
				for r := range int(b.NumRows()) {
					row := ""
					for c := range int(b.NumCols()) {
						row += b.Column(c).ValueStr(r) + "|"
					}
					out[i] = append(out[i], row)
				}
				return nil
			})
		})
	}
	wg.Wait()
	fe.Release()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("part [%d, %d): %v", cuts[i], cuts[i+1], err)
		}
	}
	return slices.Concat(out...)
}
