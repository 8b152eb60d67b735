package parquet_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	pq "github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/file"

	"github.com/sluicedata/sluice/formats"
	"github.com/sluicedata/sluice/formats/parquet"
	"github.com/sluicedata/sluice/formats/parquet/internal/thrift"
	"github.com/sluicedata/sluice/storage"
)

// writeFallback writes n rows in one row group of small pages and no page
// index, dictionaries on as pyarrow has them, bounded at 4 KiB: id, a
// nullable float and a unique string fall back to PLAIN pages after their
// first pages, a string of 50 values stays dictionary-encoded throughout.
func writeFallback(t *testing.T, path string, n int, v2 bool) {
	t.Helper()
	mem := memory.NewGoAllocator()
	fields := []arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "u", Type: arrow.BinaryTypes.String},
		{Name: "x", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	}
	ids, ss, us, xs := array.NewInt64Builder(mem), array.NewStringBuilder(mem), array.NewStringBuilder(mem), array.NewFloat64Builder(mem)
	r := rand.New(rand.NewPCG(5, 6))
	for i := range n {
		ids.Append(int64(i))
		if i%7 == 3 {
			ss.AppendNull()
		} else {
			ss.Append(fmt.Sprintf("v%d", i%50))
		}
		us.Append(fmt.Sprintf("u-%d-%d", i, r.IntN(1000)))
		if i%5 == 0 {
			xs.AppendNull()
		} else {
			xs.Append(r.Float64())
		}
	}
	version := pq.DataPageV1
	if v2 {
		version = pq.DataPageV2
	}
	arrs := []arrow.Array{ids.NewArray(), ss.NewArray(), us.NewArray(), xs.NewArray()}
	writeArrays(t, path, fields, arrs, n, n,
		pq.WithDataPageSize(2<<10),
		pq.WithBatchSize(128),
		pq.WithDataPageVersion(version),
		pq.WithCompression(compress.Codecs.Snappy),
		pq.WithDictionaryPageSizeLimit(4<<10),
	)
}

// chunkPages is what the test itself reads of a column chunk's pages:
// its dictionary page and each data page, with the row it starts at and
// whether its encoding takes the dictionary.
type chunkPages struct {
	dict  [2]int64 // offset and size, size 0 where there is none
	pages []testPage
}

type testPage struct {
	offset, size, firstRow int64
	dict                   bool
}

// readChunkPages parses the page headers of every chunk of row group 0.
func readChunkPages(t *testing.T, path string) []chunkPages {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	fr, err := file.OpenParquetFile(path, false)
	if err != nil {
		t.Fatal(err)
	}
	defer fr.Close()
	g := fr.MetaData().RowGroup(0)
	var out []chunkPages
	for c := range g.NumColumns() {
		cc, err := g.ColumnChunk(c)
		if err != nil {
			t.Fatal(err)
		}
		at := cc.DataPageOffset()
		if cc.HasDictionaryPage() && cc.DictionaryPageOffset() > 0 {
			at = min(at, cc.DictionaryPageOffset())
		}
		end := at + cc.TotalCompressedSize()
		var cp chunkPages
		var row int64
		for at < end {
			h, err := thrift.ParsePageHeader(data[at:])
			if err != nil {
				t.Fatal(err)
			}
			size := int64(h.Size) + h.Compressed
			switch h.Type {
			case thrift.PageDictionary:
				cp.dict = [2]int64{at, size}
			case thrift.PageData, thrift.PageDataV2:
				cp.pages = append(cp.pages, testPage{offset: at, size: size, firstRow: row, dict: h.Encoding == 2 || h.Encoding == 8})
				row += max(h.Values, h.Rows)
			}
			at += size
		}
		out = append(out, cp)
	}
	return out
}

// least is the fewest bytes a read of rows [lo, hi) fetches: the pages
// those rows lie in, and a chunk's dictionary page only where one of them
// takes its values from it (withDict: every chunk's, as arrow-go reads).
func least(chunks []chunkPages, lo, hi int64, withDict bool) int64 {
	var n int64
	for _, c := range chunks {
		needs := false
		for i, p := range c.pages {
			end := int64(1 << 62)
			if i+1 < len(c.pages) {
				end = c.pages[i+1].firstRow
			}
			if p.firstRow < hi && end > lo {
				n += p.size
				needs = needs || p.dict
			}
		}
		if needs || withDict {
			n += c.dict[1]
		}
	}
	return n
}

// A read of part of a row group without a page index fetches the pages its
// rows lie in and, of each column, the dictionary page only where one of
// those pages is dictionary-encoded: past the writer's fall back to PLAIN
// (pyarrow's and arrow-go's after 1 MiB of dictionary) it is left out, the
// bytes fetched then being exactly those. arrow-go, which reads a chunk's
// dictionary whatever its pages need, still gets it: with
// Format.ArrowGoDecode it is fetched, and where flatdecode declines the
// pages the dictionary left out is read then. Every value is checked
// against a whole read.
func TestWalkLeavesOutDictionariesPastFallback(t *testing.T) {
	defer parquet.WalkAll()()
	const n = 20_000
	for _, v2 := range []bool{false, true} {
		path := filepath.Join(t.TempDir(), "fallback.parquet")
		writeFallback(t, path, n, v2)
		chunks := readChunkPages(t, path)
		fellBack := 0
		for _, c := range chunks {
			if c.dict[1] > 0 && !c.pages[len(c.pages)-1].dict {
				fellBack++
			}
		}
		if fellBack != 3 {
			t.Fatalf("v2 %t: %d chunks fell back to PLAIN, want 3 (id, u, x)", v2, fellBack)
		}
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		want := wholeRows(t, path, 0, n, mem)
		for _, c := range []struct {
			name    string
			format  parquet.Format
			decline bool
		}{{"flatdecode", parquet.Format{}, false}, {"arrow-go", parquet.Format{ArrowGoDecode: true}, false}, {"declined", parquet.Format{}, true}} {
			var bytes, requests atomic.Int64
			ds, err := formats.Plan(context.Background(), []string{path}, formats.PlanOptions{Formats: []formats.Format{c.format}, Storage: storage.Options{Wrap: func(b storage.Bucket) storage.Bucket {
				cb := storage.NewCounting(b)
				cb.OnRead = func(_ string, _ int64, n int) {
					bytes.Add(int64(n))
					requests.Add(1)
				}
				return cb
			}}})
			if err != nil {
				t.Fatal(err)
			}
			// The walk's header reads are not the fetch's.
			if err := ds.FindPages(context.Background(), 0, 0); err != nil {
				t.Fatal(err)
			}
			undo := func() {}
			if c.decline {
				undo = parquet.DeclinePaged()
			}
			leftOut := false
			for _, r := range [][2]int64{{0, 50}, {n / 2, n/2 + 700}, {n/2 + 700, n/2 + 701}, {n - 300, n}, {30, n - 30}} {
				lo, hi := r[0], r[1]
				bytes.Store(0)
				requests.Store(0)
				got := renderRows(t, ds, lo, hi, mem)
				if !slices.Equal(got, want[lo:hi]) {
					t.Fatalf("v2 %t, %s: rows [%d, %d) differ from a whole read", v2, c.name, lo, hi)
				}
				low, all := least(chunks, lo, hi, false), least(chunks, lo, hi, true)
				leftOut = leftOut || low < all
				wantBytes := low
				if c.format.ArrowGoDecode || c.decline {
					wantBytes = all
				}
				t.Logf("v2 %t, %s: rows [%d, %d): %d bytes in %d requests (the pages and the dictionaries they need %d, with every dictionary %d)", v2, c.name, lo, hi, bytes.Load(), requests.Load(), low, all)
				if bytes.Load() != wantBytes {
					t.Errorf("v2 %t, %s: rows [%d, %d) fetched %d bytes, want %d", v2, c.name, lo, hi, bytes.Load(), wantBytes)
				}
			}
			undo()
			if !leftOut {
				t.Errorf("v2 %t: no read could leave a dictionary out: the file does not test it", v2)
			}
			ds.Close()
		}
		mem.AssertSize(t, 0)
	}
}
