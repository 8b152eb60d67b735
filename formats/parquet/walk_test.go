package parquet_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	pq "github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/file"
	"golang.org/x/sync/errgroup"

	"github.com/sluicedata/sluice/formats"
	"github.com/sluicedata/sluice/formats/parquet"
	"github.com/sluicedata/sluice/internal/testkit/sample"
	"github.com/sluicedata/sluice/storage"
)

// writeNoIndex writes n rows in row groups of rgRows with small pages and
// no page index, as pyarrow writes by default: a required int64, a
// dictionary-encoded string with nulls, a string whose dictionary
// overflows into plain pages, a float with nulls, a boolean, a struct of
// two leaves and a list.
func writeNoIndex(t testing.TB, path string, n, rgRows int, v2 bool, codec compress.Compression) {
	t.Helper()
	mem := memory.NewGoAllocator()
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "u", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "x", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		{Name: "b", Type: arrow.FixedWidthTypes.Boolean},
		{Name: "st", Type: arrow.StructOf(
			arrow.Field{Name: "a", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
			arrow.Field{Name: "c", Type: arrow.BinaryTypes.String},
		)},
		{Name: "l", Type: arrow.ListOf(arrow.PrimitiveTypes.Int32), Nullable: true},
	}, nil)
	b := array.NewRecordBuilder(mem, schema)
	defer b.Release()
	r := rand.New(rand.NewPCG(3, 4))
	for i := range n {
		b.Field(0).(*array.Int64Builder).Append(int64(i))
		if i%7 == 3 {
			b.Field(1).AppendNull()
		} else {
			b.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("v%d", i%50))
		}
		if i%13 == 1 {
			b.Field(2).AppendNull()
		} else {
			b.Field(2).(*array.StringBuilder).Append(fmt.Sprintf("unique-%d-%d", i, r.IntN(1000)))
		}
		if i%5 == 0 {
			b.Field(3).AppendNull()
		} else {
			b.Field(3).(*array.Float64Builder).Append(r.Float64())
		}
		b.Field(4).(*array.BooleanBuilder).Append(i%3 == 0)
		sb := b.Field(5).(*array.StructBuilder)
		sb.Append(true)
		if i%4 == 2 {
			sb.FieldBuilder(0).AppendNull()
		} else {
			sb.FieldBuilder(0).(*array.Int32Builder).Append(int32(i * 3))
		}
		sb.FieldBuilder(1).(*array.StringBuilder).Append(strings.Repeat("c", i%9))
		lb := b.Field(6).(*array.ListBuilder)
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
	version := pq.DataPageV1
	if v2 {
		version = pq.DataPageV2
	}
	writeRecord(t, path, rec, pq.NewWriterProperties(
		pq.WithMaxRowGroupLength(int64(rgRows)),
		pq.WithDataPageSize(512),
		pq.WithBatchSize(64), // pages of about DataPageSize
		pq.WithDataPageVersion(version),
		pq.WithCompression(codec),
		pq.WithDictionaryDefault(false),
		pq.WithDictionaryFor("s", true),
		pq.WithDictionaryFor("u", true),
		pq.WithDictionaryPageSizeLimit(2<<10), // u falls back to plain pages
	))
}

// pageStarts returns the file rows at which some data page of a column
// without repetition starts, read with arrow-go's own page reader.
func pageStarts(t testing.TB, path string) []int64 {
	t.Helper()
	fr, err := file.OpenParquetFile(path, false)
	if err != nil {
		t.Fatal(err)
	}
	defer fr.Close()
	var out []int64
	var first int64
	for rg := range fr.NumRowGroups() {
		r := fr.RowGroup(rg)
		for c := range r.NumColumns() {
			if fr.MetaData().Schema.Column(c).MaxRepetitionLevel() > 0 {
				continue
			}
			pr, err := r.GetColumnPageReader(c)
			if err != nil {
				t.Fatal(err)
			}
			row := first
			for pr.Next() {
				switch p := pr.Page().(type) {
				case *file.DataPageV1:
					out = append(out, row)
					row += int64(p.NumValues())
				case *file.DataPageV2:
					out = append(out, row)
					row += int64(p.NumRows())
				}
			}
			if err := pr.Err(); err != nil {
				t.Fatal(err)
			}
		}
		first += r.NumRows()
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// readRows plans path anew (or uses ds) and renders rows [lo, hi).
func renderRows(t testing.TB, ds *formats.Scan, lo, hi int64, mem memory.Allocator) []string {
	t.Helper()
	var out []string
	err := ds.Read(context.Background(), 0, ds.RowRange(0, lo, hi), 100, mem, func(b arrow.RecordBatch) error {
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
	return out
}

// wholeRows renders rows [lo, hi) of path read as whole row groups: the
// reference a read by pages is checked against.
func wholeRows(t testing.TB, path string, lo, hi int64, mem memory.Allocator) []string {
	t.Helper()
	whole, _, _ := countingPlan(t, path, nil)
	defer whole.Close()
	return renderRows(t, whole, lo, hi, mem)
}

// countingPlan plans path with a counter of the bytes and requests read
// after planning.
func countingPlan(t testing.TB, path string, cache formats.Cache, columns ...string) (*formats.Scan, *atomic.Int64, *atomic.Int64) {
	t.Helper()
	var bytes, requests atomic.Int64
	opts := formats.PlanOptions{Formats: []formats.Format{parquet.Format{}}, Cache: cache, Columns: columns, Storage: storage.Options{Wrap: func(b storage.Bucket) storage.Bucket {
		c := storage.NewCounting(b)
		c.OnRead = func(_ string, _ int64, n int) {
			bytes.Add(int64(n))
			requests.Add(1)
		}
		return c
	}}}
	ds, err := formats.Plan(context.Background(), []string{path}, opts)
	if err != nil {
		t.Fatal(err)
	}
	bytes.Store(0)
	requests.Store(0)
	return ds, &bytes, &requests
}

// A file without a page index read in pieces gives the rows a whole read
// gives, for cuts at, just before and just after every page boundary of
// every column, in version 1 and 2 pages, dictionary and plain, with nulls,
// strings, a struct and a list: the row groups are read by the pages a
// walk of their headers finds.
func TestWalkedPagesReadAsWhole(t *testing.T) {
	defer parquet.WalkAll()()
	const n, rgRows = 3000, 1000
	for _, c := range []struct {
		name  string
		v2    bool
		codec compress.Compression
	}{{"v1 snappy", false, compress.Codecs.Snappy}, {"v2 uncompressed", true, compress.Codecs.Uncompressed}, {"v2 zstd", true, compress.Codecs.Zstd}} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "noindex.parquet")
			writeNoIndex(t, path, n, rgRows, c.v2, c.codec)
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			want := wholeRows(t, path, 0, n, mem)

			var points []int64
			for _, s := range pageStarts(t, path) {
				for _, p := range []int64{s - 1, s, s + 1} {
					if p >= 0 && p <= n {
						points = append(points, p)
					}
				}
			}
			points = append(points, n)
			slices.Sort(points)
			points = slices.Compact(points)
			if len(points) < 100 {
				t.Fatalf("%d cut points: the file's pages are not small", len(points))
			}
			r := rand.New(rand.NewPCG(7, 8))
			ds, bytes, _ := countingPlan(t, path, nil)
			defer ds.Close()
			check := func(ds *formats.Scan, lo, hi int64) {
				got := renderRows(t, ds, lo, hi, mem)
				if len(got) != int(hi-lo) {
					t.Fatalf("rows [%d, %d): %d rows", lo, hi, len(got))
				}
				for i := range got {
					if got[i] != want[lo+int64(i)] {
						t.Fatalf("rows [%d, %d): row %d is %q, want %q", lo, hi, lo+int64(i), got[i], want[lo+int64(i)])
					}
				}
			}
			for i, lo := range points[:len(points)-1] {
				if i%sample.Count(1, 8) != 0 {
					continue
				}
				his := []int64{lo + 1, points[i+1], points[min(i+3, len(points)-1)], points[i+1+r.IntN(len(points)-1-i)]}
				for _, hi := range his {
					if hi > lo && hi <= n {
						check(ds, lo, hi)
					}
				}
			}
			// Fresh walks, each from a plan of its own.
			for range sample.Count(40, 5) {
				lo := points[r.IntN(len(points)-1)]
				hi := lo + 1 + r.Int64N(min(n-lo, 700))
				fresh, _, _ := countingPlan(t, path, nil)
				check(fresh, lo, hi)
				fresh.Close()
			}
			// The walks did serve the reads: a cut fetches less than its
			// row group.
			bytes.Store(0)
			check(ds, 1400, 1450)
			if got, rg := bytes.Load(), ds.Fragments[0].Units[1].Bytes; got >= rg/2 {
				t.Errorf("rows [1400, 1450) fetched %d bytes of a row group of %d", got, rg)
			}
		})
	}
}

// A cut of a row group without a page index fetches about the pages its
// rows need, not the whole chunks; the walk reads each page header once
// per process, and not again where the plan's cache kept it.
func TestWalkFetchesThePagesNeeded(t *testing.T) {
	const n = 200_000
	path := filepath.Join(t.TempDir(), "plain.parquet")
	writePaged(t, path, n, false)
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	cols := []string{"id", "s", "x"} // the list column would be fetched whole
	whole, _, _ := countingPlan(t, path, nil, cols...)
	want := renderRows(t, whole, 0, n, mem)
	whole.Close()
	cache := &formats.MemoryCache{}
	ds, bytes, requests := countingPlan(t, path, cache, cols...)
	defer ds.Close()
	rgBytes := ds.Fragments[0].Units[0].Bytes
	for _, c := range []struct {
		lo, hi  int64
		headers bool // whether the walk has headers to read
	}{{100_000, 110_000, true}, {110_000, 120_000, true}, {0, 5000, false}, {195_000, n, true}, {150_000, 150_001, false}} {
		bytes.Store(0)
		requests.Store(0)
		got := renderRows(t, ds, c.lo, c.hi, mem)
		if !slices.Equal(got, want[c.lo:c.hi]) {
			t.Fatalf("rows [%d, %d) differ from a whole read", c.lo, c.hi)
		}
		// The rows' share, a page per column at each end (pages of about
		// 2 KiB), the dictionary, and the walk's headers: one small
		// request each, of a few dozen bytes (the fetch itself is a
		// request per column, two for the dictionary's).
		share := rgBytes * (c.hi - c.lo) / n
		headers := requests.Load() - 4
		limit := share + 16<<10 + 100*headers
		t.Logf("rows [%d, %d): %d bytes (share %d, limit %d) in %d requests", c.lo, c.hi, bytes.Load(), share, limit, requests.Load())
		if bytes.Load() > limit {
			t.Errorf("rows [%d, %d) fetched %d bytes, more than %d (the row group is %d)", c.lo, c.hi, bytes.Load(), limit, rgBytes)
		}
		if c.headers != (headers > 0) {
			t.Errorf("rows [%d, %d) took %d requests: the walk read %d headers", c.lo, c.hi, requests.Load(), headers)
		}
	}
	// A new plan with the same cache walks nothing.
	ds2, bytes2, requests2 := countingPlan(t, path, cache, cols...)
	defer ds2.Close()
	if got := renderRows(t, ds2, 100_000, 110_000, mem); !slices.Equal(got, want[100_000:110_000]) {
		t.Fatal("rows [100000, 110000) differ from a whole read with the walk from the cache")
	}
	if requests2.Load() > 4 || bytes2.Load() > rgBytes/10 {
		t.Errorf("with the walk in the plan's cache rows [100000, 110000) took %d requests and %d bytes, want the fetch's alone", requests2.Load(), bytes2.Load())
	}
}

// A row group whose chunks the footer says hold one data page each (their
// encoding_stats) is not walked: a walk could leave nothing out, and would
// cost a request per column.
func TestWalkSkipsSinglePages(t *testing.T) {
	defer parquet.WalkAll()()
	const n = 60_000
	b := array.NewInt64Builder(memory.DefaultAllocator)
	defer b.Release()
	for i := range n {
		b.Append(int64(i))
	}
	ids := b.NewArray()
	defer ids.Release()
	rec := array.NewRecordBatch(arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}, nil), []arrow.Array{ids}, n)
	defer rec.Release()
	path := filepath.Join(t.TempDir(), "one-page.parquet")
	writeRecord(t, path, rec, pq.NewWriterProperties(pq.WithDictionaryDefault(false)))
	if got := len(pageStarts(t, path)); got != 1 {
		t.Fatalf("%d pages, want 1", got)
	}
	ds, bytes, requests := countingPlan(t, path, nil)
	defer ds.Close()
	if ds.Fragments[0].Units[0].Paged {
		t.Error("a row group of one page a chunk is paged: a cut would be counted as read by pages")
	}
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	got := renderRows(t, ds, 1000, 2000, mem)
	if len(got) != 1000 || got[0] != "1000|" {
		t.Fatalf("rows [1000, 2000) read as %d rows from %q", len(got), got[0])
	}
	if requests.Load() != 1 || bytes.Load() != ds.Fragments[0].Units[0].Bytes {
		t.Errorf("rows [1000, 2000) of a one-page chunk took %d requests and %d bytes, want 1 and the chunk's %d", requests.Load(), bytes.Load(), ds.Fragments[0].Units[0].Bytes)
	}
}

// Reads of one file at once share its walks: each row group's pages are
// walked once, whichever read gets there first, and every read gets its
// rows (run with -race).
func TestWalkConcurrentReads(t *testing.T) {
	defer parquet.WalkAll()()
	const n, rgRows = 3000, 1000
	path := filepath.Join(t.TempDir(), "noindex.parquet")
	writeNoIndex(t, path, n, rgRows, false, compress.Codecs.Snappy)
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	want := wholeRows(t, path, 0, n, mem)
	ds, _, _ := countingPlan(t, path, &formats.MemoryCache{})
	defer ds.Close()
	var eg errgroup.Group
	for g := range 8 {
		eg.Go(func() error {
			r := rand.New(rand.NewPCG(uint64(g), 9))
			for range 30 {
				lo := r.Int64N(n - 1)
				hi := lo + 1 + r.Int64N(min(n-lo-1, 400)+1)
				var got []string
				err := ds.Read(context.Background(), 0, ds.RowRange(0, lo, hi), 64, mem, func(b arrow.RecordBatch) error {
					defer b.Release()
					for i := range int(b.NumRows()) {
						row := ""
						for c := range int(b.NumCols()) {
							row += b.Column(c).ValueStr(i) + "|"
						}
						got = append(got, row)
					}
					return nil
				})
				if err != nil {
					return err
				}
				if !slices.Equal(got, want[lo:hi]) {
					return fmt.Errorf("rows [%d, %d) differ from a whole read", lo, hi)
				}
			}
			return nil
		})
	}
	if err := eg.Wait(); err != nil {
		t.Fatal(err)
	}
}

// A row group without a page index is paged (formats.Unit.Paged: a read of
// part of it walks its pages) where its footer counts several pages in a
// chunk of its selected columns, all flat; a list column, or chunks of one
// page, leave it read whole where cut.
func TestWalkableRowGroupsArePaged(t *testing.T) {
	path := filepath.Join(t.TempDir(), "no-index.parquet")
	writeNoIndex(t, path, 60_000, 60_000, false, compress.Codecs.Uncompressed)
	if got := len(pageStarts(t, path)); got < 4 {
		t.Fatalf("%d pages in the id chunk, want several", got)
	}
	for _, c := range []struct {
		columns []string
		paged   bool
	}{{[]string{"id", "x"}, true}, {[]string{"id", "l"}, false}, {nil, false}} {
		ds, _, _ := countingPlan(t, path, nil, c.columns...)
		if got := ds.Fragments[0].Units[0].Paged; got != c.paged {
			t.Errorf("columns %v: Paged %v, want %v", c.columns, got, c.paged)
		}
		ds.Close()
	}
}

// FindPages walks a row group's chunks ahead of any read and keeps the
// walk in the plan's cache: a later plan with that cache reads part of the
// row group without reading a page header, where one without it walks.
func TestFindPagesAheadOfReads(t *testing.T) {
	defer parquet.WalkAll()()
	const n, rgRows = 3000, 1000
	path := filepath.Join(t.TempDir(), "noindex.parquet")
	writeNoIndex(t, path, n, rgRows, false, compress.Codecs.Snappy)
	cols := []string{"id", "s", "u", "x", "b"} // flat: read by pages
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	ctx := context.Background()

	cache := &formats.MemoryCache{}
	planner, _, walks := countingPlan(t, path, cache, cols...)
	defer planner.Close()
	if err := planner.FindPages(ctx, 0, 1); err != nil {
		t.Fatal(err)
	}
	if walks.Load() < 5 {
		t.Fatalf("FindPages made %d requests: it walked no chunk", walks.Load())
	}
	walks.Store(0)
	if err := planner.FindPages(ctx, 0, 1); err != nil || walks.Load() != 0 {
		t.Fatalf("FindPages again: %d requests, %v: the walk is kept", walks.Load(), err)
	}
	if err := planner.FindPages(ctx, 0, 3); err == nil {
		t.Error("FindPages of row group 3 of 3: no error")
	}

	read := func(cache formats.Cache) ([]string, int64) {
		ds, _, requests := countingPlan(t, path, cache, cols...)
		defer ds.Close()
		return renderRows(t, ds, 1400, 1500, mem), requests.Load()
	}
	got, withWalk := read(cache)
	want, without := read(&formats.MemoryCache{})
	if !slices.Equal(got, want) || len(got) != 100 {
		t.Fatalf("rows [1400, 1500) read with the walk found ahead differ from those read walking (%d rows, %d)", len(got), len(want))
	}
	// Without the walk the read walks 400 rows of pages of each column
	// first: a request a page header.
	t.Logf("rows [1400, 1500): %d requests with the walk found ahead, %d walking", withWalk, without)
	if withWalk+20 > without {
		t.Errorf("rows [1400, 1500): %d requests with the walk found ahead, %d walking: want far fewer", withWalk, without)
	}
}

// A row group read in two parts, as a stream reads one cut into chunks,
// reads no page header by itself: the first part's fetch brings a share of
// each chunk and the walk goes on in those bytes (a request more for the
// rest of the last page, one for the header after it), and the second
// runs to the row group's end, so its fetch brings every header it needs.
// Read the other way round, the second part's read walks as far as its
// first row, a request a header, and no further. The values are those of a
// whole read, and the walk finished in fetched bytes is kept in the plan's
// cache as one read header by header.
func TestWalkGoesOnInFetchedBytes(t *testing.T) {
	const n = 200_000
	path := filepath.Join(t.TempDir(), "plain.parquet")
	writePaged(t, path, n, false)
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	want := wholeRows(t, path, 0, n, mem)
	read := func(ds *formats.Scan, requests *atomic.Int64, lo, hi int64) int64 {
		t.Helper()
		requests.Store(0)
		if got := renderRows(t, ds, lo, hi, mem); !slices.Equal(got, want[lo:hi]) {
			t.Fatalf("rows [%d, %d) differ from a whole read", lo, hi)
		}
		return requests.Load()
	}
	// The fetch: a request per column, one more for each dictionary
	// fetched apart from its pages.
	const fetchRequests = 8

	cache := &formats.MemoryCache{}
	ds, bytes, requests := countingPlan(t, path, cache)
	rgBytes := ds.Fragments[0].Units[0].Bytes
	half := read(ds, requests, 0, n/2)
	halfBytes := bytes.Load()
	if half > 3*fetchRequests {
		t.Errorf("rows [0, %d) took %d requests: the walk read headers one by one", n/2, half)
	}
	bytes.Store(0)
	if got := read(ds, requests, n/2, n); got > fetchRequests {
		t.Errorf("rows [%d, %d) after rows [0, %d) took %d requests: the walk read headers the fetch brought", n/2, n, n/2, got)
	}
	t.Logf("rows [0, %d): %d bytes in %d requests; rows [%d, %d): %d bytes; the row group: %d", n/2, halfBytes, half, n/2, n, bytes.Load(), rgBytes)
	ds.Close()

	backwards, _, requests := countingPlan(t, path, nil)
	defer backwards.Close()
	if got := read(backwards, requests, n/2, n); got <= 10*fetchRequests {
		t.Fatalf("rows [%d, %d) first took %d requests: the pages are not small", n/2, n, got)
	}
	read(backwards, requests, 0, n/2)

	// The whole walk is in the cache: no header is read again.
	again, _, requests := countingPlan(t, path, cache)
	defer again.Close()
	if got := read(again, requests, 3*n/4, 3*n/4+100); got > fetchRequests {
		t.Errorf("with the walk in the cache rows [%d, %d) took %d requests", 3*n/4, 3*n/4+100, got)
	}
}

// writeUneven writes n rows, an id and a string, in one row group of
// small PLAIN pages without a page index: the strings of the first half
// are long and those of the second short (longFirst), or the other way
// round.
func writeUneven(t testing.TB, path string, n int, longFirst bool) {
	t.Helper()
	mem := memory.NewGoAllocator()
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "s", Type: arrow.BinaryTypes.String},
	}, nil)
	b := array.NewRecordBuilder(mem, schema)
	defer b.Release()
	for i := range n {
		b.Field(0).(*array.Int64Builder).Append(int64(i))
		long := (i < n/2) == longFirst
		l := 3
		if long {
			l = 150 + i%50
		}
		b.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("%d:%s", i, strings.Repeat("s", l)))
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	writeRecord(t, path, rec, pq.NewWriterProperties(
		pq.WithMaxRowGroupLength(int64(n)),
		pq.WithDataPageSize(2<<10),
		pq.WithBatchSize(64),
		pq.WithDictionaryDefault(false),
		pq.WithPageIndexEnabled(false),
	))
}

// The first part of a row group read in two fetches a share of each chunk
// before it knows where its pages end: where the pages of the part's rows
// turn out larger than the share, the walk goes on past it in blocks
// (not a request a header) and the rest comes in a second round, no byte
// fetched twice; where they turn out smaller, the bytes past them are
// fetched for nothing, but no more than the share. The values are a whole
// read's either way.
func TestHeadReadGuessesItsPages(t *testing.T) {
	const n = 20_000
	for _, longFirst := range []bool{true, false} {
		t.Run(fmt.Sprintf("long first %v", longFirst), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "uneven.parquet")
			writeUneven(t, path, n, longFirst)
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			want := wholeRows(t, path, 0, n, mem)
			ds, bytes, requests := countingPlan(t, path, nil)
			defer ds.Close()
			rgBytes := ds.Fragments[0].Units[0].Bytes
			if got := renderRows(t, ds, 0, n/2, mem); !slices.Equal(got, want[:n/2]) {
				t.Fatalf("rows [0, %d) differ from a whole read", n/2)
			}
			headBytes, headRequests := bytes.Load(), requests.Load()
			bytes.Store(0)
			requests.Store(0)
			if got := renderRows(t, ds, n/2, n, mem); !slices.Equal(got, want[n/2:]) {
				t.Fatalf("rows [%d, %d) differ from a whole read", n/2, n)
			}
			t.Logf("rows [0, %d): %d bytes in %d requests; rows [%d, %d): %d bytes in %d requests; the row group: %d bytes", n/2, headBytes, headRequests, n/2, n, bytes.Load(), requests.Load(), rgBytes)
			if longFirst {
				// Some 800 pages in the first half: a walk of their
				// headers would be a request each.
				if headRequests > 40 {
					t.Errorf("rows [0, %d) took %d requests", n/2, headRequests)
				}
				// The last block of the walk past the guess, and the page
				// at the cut, fetched by both parts.
				if total := headBytes + bytes.Load(); total > rgBytes+rgBytes/16 {
					t.Errorf("the two parts fetched %d bytes of a row group of %d", total, rgBytes)
				}
			} else if headBytes > rgBytes/2+64<<10 { // the share, and the walk's first block
				t.Errorf("rows [0, %d) fetched %d bytes, more than the share of a row group of %d", n/2, headBytes, rgBytes)
			}
			if requests.Load() > 6 {
				t.Errorf("rows [%d, %d) after rows [0, %d) took %d requests: the walk read headers the fetch brought", n/2, n, n/2, requests.Load())
			}
		})
	}
}

// A head read whose chunks the walk has already found past its rows in
// some columns and not in others (another read walked them on, or the
// plan's cache holds a walk of them) fetches of those columns the pages
// its rows lie in, not the bytes up to where the walk got: two windows
// of a row group read at once fetched a page range twice so (io 1.23
// against 1.04 in stream's TestCutRowGroups, one race-detector run in
// four).
func TestHeadReadTakesOnlyItsPagesOfAWalkAhead(t *testing.T) {
	defer parquet.WalkAll()()
	const n = 20_000
	path := filepath.Join(t.TempDir(), "uneven.parquet")
	writeUneven(t, path, n, true)
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	want := wholeRows(t, path, 0, n/4, mem)

	cache := &formats.MemoryCache{}
	// One column's walk as far as row 3n/4, into the cache.
	ahead, _, _ := countingPlan(t, path, cache, "s")
	renderRows(t, ahead, n/2, 3*n/4, mem)
	ahead.Close()

	ds, bytes, requests := countingPlan(t, path, cache)
	defer ds.Close()
	if got := renderRows(t, ds, 0, n/4, mem); !slices.Equal(got, want) {
		t.Fatalf("rows [0, %d) differ from a whole read", n/4)
	}
	rgBytes := ds.Fragments[0].Units[0].Bytes
	t.Logf("rows [0, %d): %d bytes in %d requests; the row group: %d bytes", n/4, bytes.Load(), requests.Load(), rgBytes)
	// The first quarter of the rows holds a little over half of the bytes
	// (the long strings come first); up to row 3n/4 would be nearly all.
	if got := bytes.Load(); got > rgBytes*5/8 {
		t.Errorf("rows [0, %d) fetched %d bytes of a row group of %d: the head read fetched as far as the walk had got", n/4, got, rgBytes)
	}
}
