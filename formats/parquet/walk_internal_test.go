package parquet

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	pq "github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/metadata"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/sluicedata/sluice/formats"
	"github.com/sluicedata/sluice/formats/parquet/internal/thrift"
)

// idPages returns a file of one required int64 column "id" holding 0 to
// rows-1 in one row group of pages of about 64 values, without a page
// index, and where its pages lie.
func idPages(t testing.TB, rows int, v2 bool) ([]byte, []pageLoc) {
	t.Helper()
	b := array.NewInt64Builder(memory.DefaultAllocator)
	defer b.Release()
	for i := range rows {
		b.Append(int64(i))
	}
	ids := b.NewArray()
	defer ids.Release()
	rec := array.NewRecordBatch(arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}, nil), []arrow.Array{ids}, int64(rows))
	defer rec.Release()
	version := pq.DataPageV1
	if v2 {
		version = pq.DataPageV2
	}
	var out bytes.Buffer
	props := pq.NewWriterProperties(pq.WithDictionaryDefault(false), pq.WithDataPageSize(512), pq.WithBatchSize(64), pq.WithDataPageVersion(version))
	w, err := pqarrow.NewFileWriter(rec.Schema(), &out, props, pqarrow.DefaultWriterProps())
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	data := out.Bytes()
	var pages []pageLoc
	var row int64
	for at := int64(4); at < int64(len(data))-8; {
		h, err := thrift.ParsePageHeader(data[at:])
		if err != nil || (h.Type != thrift.PageData && h.Type != thrift.PageDataV2) {
			break // the footer
		}
		pages = append(pages, pageLoc{offset: at, size: int64(h.Size) + h.Compressed, firstRow: row})
		row += max(h.Values, h.Rows)
		at += int64(h.Size) + h.Compressed
	}
	if row != int64(rows) || len(pages) < rows/100 {
		t.Fatalf("found %d pages of %d rows, want %d rows in %d or more", len(pages), row, rows, rows/100)
	}
	return data, pages
}

// chunkOf is the walkChunk of the id column of an idPages file.
func chunkOf(data []byte, pages []pageLoc, rows int64) walkChunk {
	last := pages[len(pages)-1]
	return walkChunk{name: "id", start: 4, end: last.offset + last.size, dataOffset: 4, rows: rows}
}

// compressedSizeAt is where a page header's compressed_page_size varint
// lies: after the type and the uncompressed size, each a field header and
// a varint.
func compressedSizeAt(h []byte) (at, width int) {
	at = 1
	for range 2 {
		_, n := binary.Uvarint(h[at:])
		at += n + 1
	}
	_, width = binary.Uvarint(h[at:])
	return at, width
}

// setVarint overwrites the zigzag varint at b[at:at+width] with v, which
// must take as many bytes.
func setVarint(t *testing.T, b []byte, at, width int, v int64) {
	t.Helper()
	enc := binary.AppendUvarint(nil, zigzagOf(v))
	if len(enc) != width {
		t.Fatalf("%d takes %d bytes, not %d", v, len(enc), width)
	}
	copy(b[at:], enc)
}

// The walk of a chunk finds the pages a writer wrote, in parts as far as
// each read needs, and refuses headers that lie with an error naming the
// row group, the column and the byte.
func TestWalkChunk(t *testing.T) {
	for _, v2 := range []bool{false, true} {
		data, want := idPages(t, 2000, v2)
		c := chunkOf(data, want, 2000)
		w := &leafWalk{next: c.start}
		for _, hi := range []int64{1, 500, 499, 1999, 2000} {
			if err := w.walkTo(context.Background(), bytes.NewReader(data), c, hi); err != nil {
				t.Fatal(err)
			}
			if w.rows < hi || w.unusable || !slices.Equal(w.pages, want[:len(w.pages)]) {
				t.Fatalf("v2 %v: walked to %d: %d pages of %d rows, unusable %v", v2, hi, len(w.pages), w.rows, w.unusable)
			}
			if len(w.pages) < len(want) && w.pages[len(w.pages)-1].firstRow >= hi {
				t.Fatalf("v2 %v: walked to %d: a page more than needed", v2, hi)
			}
		}
		if !w.done {
			t.Errorf("v2 %v: the walk of every page is not done", v2)
		}
		pages, rows, dict, done, err := decodeWalk(w.encode(), c)
		if err != nil || !slices.Equal(pages, want) || rows != 2000 || !done || dict != w.dictPages {
			t.Errorf("v2 %v: the walk does not round-trip the cache's encoding: %v", v2, err)
		}
		got, err := parseOffsetIndex(appendOffsetIndex(nil, want))
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("v2 %v: the offset index made of the walk reads back as %v, %v", v2, got, err)
		}
	}
}

// Headers that lie are refused with an error that names the row group,
// the column and the byte, never a panic or other rows.
func TestWalkCorruptHeaders(t *testing.T) {
	data, pages := idPages(t, 2000, false)
	mid, last := pages[len(pages)/2], pages[len(pages)-1]
	for _, c := range []struct {
		name   string
		change func(b []byte) walkChunk
		want   string
	}{{
		"a compressed size past the chunk's end",
		func(b []byte) walkChunk {
			at, width := compressedSizeAt(b[last.offset:])
			setVarint(t, b, int(last.offset)+at, width, 1<<(7*width-1)-1)
			return chunkOf(b, pages, 2000)
		},
		"bytes past the end of the column chunk",
	}, {
		"a header cut by the chunk's end",
		func(b []byte) walkChunk {
			c := chunkOf(b, pages, 2000)
			c.end = last.offset + 5
			return c
		},
		"does not parse in the 5 bytes left of the column chunk",
	}, {
		"a header of garbage",
		func(b []byte) walkChunk {
			copy(b[mid.offset:], bytes.Repeat([]byte{0xff}, 12))
			return chunkOf(b, pages, 2000)
		},
		"its header does not parse",
	}, {
		"pages of more rows than the row group",
		func(b []byte) walkChunk { return chunkOf(b, pages, 1990) },
		"more than the row group's 1990",
	}, {
		"pages of fewer rows than the row group",
		func(b []byte) walkChunk { return chunkOf(b, pages, 2010) },
		"its pages hold 2000 rows, the row group 2010",
	}, {
		"a negative compressed size",
		func(b []byte) walkChunk {
			at, width := compressedSizeAt(b[mid.offset:])
			setVarint(t, b, int(mid.offset)+at, width, -mid.size+mid.size/2)
			return chunkOf(b, pages, 2000)
		},
		"a negative page size",
	}} {
		b := bytes.Clone(data)
		ch := c.change(b)
		ch.rg = 3
		w := &leafWalk{next: ch.start}
		err := w.walkTo(context.Background(), bytes.NewReader(b), ch, 2000)
		if err == nil || !errors.Is(err, formats.ErrCorrupt) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), `row group 3: column "id"`) {
			t.Errorf("%s: walk = %v, want an error saying %q", c.name, err, c.want)
		}
	}
}

// A chunk whose pages an offset index cannot describe is not walked but
// fetched whole: a dictionary after the first page, a page of no rows, a
// first page that is not at data_page_offset.
func TestWalkUnusable(t *testing.T) {
	data, pages := idPages(t, 2000, false)
	dict := func(b []byte) []byte {
		var c compact
		c.i32(1, thrift.PageDictionary)
		c.i32(2, 0)
		c.i32(3, 0)
		c.field(7, thrift.Struct)
		c.i32(1, 0) // num_values
		c.i32(2, 0) // PLAIN
		c.stop()
		c.stop()
		return c.Bytes()
	}(nil)
	for _, c := range []struct {
		name  string
		chunk func() ([]byte, walkChunk)
	}{{
		"a dictionary page after a data page",
		func() ([]byte, walkChunk) {
			b := slices.Concat(data[:pages[1].offset], dict, data[pages[1].offset:])
			c := chunkOf(data, pages, 2000)
			c.end += int64(len(dict))
			return b, c
		},
	}, {
		"a page of no rows",
		func() ([]byte, walkChunk) {
			zero := dataPageBytes(1, 0)
			b := slices.Concat(data[:pages[1].offset], zero, data[pages[1].offset:])
			c := chunkOf(data, pages, 2000)
			c.end += int64(len(zero))
			return b, c
		},
	}, {
		"data_page_offset past the first page",
		func() ([]byte, walkChunk) {
			c := chunkOf(data, pages, 2000)
			c.dataOffset = pages[1].offset
			return data, c
		},
	}} {
		b, ch := c.chunk()
		w := &leafWalk{next: ch.start}
		if err := w.walkTo(context.Background(), bytes.NewReader(b), ch, 2000); err != nil || !w.unusable {
			t.Errorf("%s: walk = %v, unusable %v; want it unusable without an error", c.name, err, w.unusable)
		}
	}
}

// What the plan's cache holds is checked as if read: bytes that are not a
// walk of the chunk are ignored, and a walk that lies about a page's rows
// is refused when the page is fetched, not read as other rows.
func TestWalkFromCache(t *testing.T) {
	old := walkMinBytes
	walkMinBytes = 0
	defer func() { walkMinBytes = old }()
	data, pages := idPages(t, 2000, false)
	path := filepath.Join(t.TempDir(), "ids.parquet")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	read := func(cache formats.Cache, lo, hi int64) ([]int64, error) { return readInt64s(t, path, cache, lo, hi) }
	ids := func(lo, hi int64) []int64 {
		var out []int64
		for i := lo; i < hi; i++ {
			out = append(out, i)
		}
		return out
	}
	cache := &formats.MemoryCache{}
	if got, err := read(cache, 900, 1100); err != nil || !slices.Equal(got, ids(900, 1100)) {
		t.Fatalf("rows [900, 1100): %v", err)
	}
	var key string
	for _, k := range cache.Keys() {
		if strings.HasPrefix(k, "parquet-pages") {
			key = k
		}
	}
	if key == "" {
		t.Fatal("no walk in the cache")
	}
	c := chunkOf(data, pages, 2000)
	for name, b := range map[string][]byte{
		"garbage":   []byte("not a walk at all"),
		"truncated": func() []byte { b, _ := cache.Get(context.Background(), []byte(key)); return b[:len(b)-1] }(),
	} {
		if _, _, _, _, err := decodeWalk(b, c); err == nil {
			t.Errorf("%s: decoded as a walk", name)
		}
		_ = cache.Set(context.Background(), []byte(key), b)
		if got, err := read(cache, 1000, 1200); err != nil || !slices.Equal(got, ids(1000, 1200)) {
			t.Errorf("%s in the cache: rows [1000, 1200): %v", name, err)
		}
	}
	// A walk whose pages are where the cache says but which gives the
	// page holding row 1000 a row less and the next one a row more.
	w := &leafWalk{next: c.start}
	if err := w.walkTo(context.Background(), bytes.NewReader(data), c, 2000); err != nil {
		t.Fatal(err)
	}
	lie := slices.IndexFunc(w.pages, func(p pageLoc) bool { return p.firstRow > 1000 })
	w.pages[lie].firstRow--
	enc := w.encode()
	_ = cache.Set(context.Background(), []byte(key), enc)
	if got, err := read(cache, 1000, 1200); err == nil || !errors.Is(err, formats.ErrCorrupt) || !strings.Contains(err.Error(), "rows, its header") {
		t.Errorf("a lying walk in the cache: rows [1000, 1200) read as %d rows, %v; want an error", len(got), err)
	}
	// The same bytes with one flipped are not taken for a walk.
	enc[len(enc)/2] ^= 1
	_ = cache.Set(context.Background(), []byte(key), enc)
	if got, err := read(cache, 1000, 1200); err != nil || !slices.Equal(got, ids(1000, 1200)) {
		t.Errorf("a damaged walk in the cache: rows [1000, 1200): %v", err)
	}
}

// The metadata arrow-go reads a walked row group with points its offset
// indexes past the end of the file, and leaves the footer's as it was.
func TestWithOffsetIndexes(t *testing.T) {
	data, _ := idPages(t, 2000, false)
	n := len(data)
	md, err := metadata.NewFileMetaData(data[n-8-int(binary.LittleEndian.Uint32(data[n-8:])):n-8], nil)
	if err != nil {
		t.Fatal(err)
	}
	ix := &rowGroupIndex{rg: 0, virtual: map[int]metadata.IndexLocation{0: {Offset: int64(n) + 10, Length: 42}}}
	view := withOffsetIndexes(md, []*rowGroupIndex{ix})
	if loc, ok := view.RowGroup(0).OffsetIndexLocation(0); !ok || loc != ix.virtual[0] {
		t.Errorf("the view's offset index is at %v, %v; want %v", loc, ok, ix.virtual[0])
	}
	if _, ok := md.RowGroup(0).OffsetIndexLocation(0); ok {
		t.Error("the footer's metadata changed")
	}
	if view.RowGroup(0).NumRows() != 2000 || view.Schema != md.Schema {
		t.Error("the view lost the row group's rows or the schema")
	}
}

// FuzzPageWalk walks any bytes as a column chunk: an error, a chunk found
// unusable, or pages that follow one another inside the chunk and hold no
// more rows than the row group, which the cache's encoding and the offset
// index round-trip. Never a panic.
func FuzzPageWalk(f *testing.F) {
	for _, v2 := range []bool{false, true} {
		data, pages := idPages(f, 300, v2)
		c := chunkOf(data, pages, 300)
		f.Add(data[c.start:c.end], uint16(300))
	}
	f.Add(slices.Concat(dataPageBytes(1, 10), dataPageBytes(2, 5)), uint16(15))
	f.Add(dataPageBytes(2, 7), uint16(9))
	f.Fuzz(func(t *testing.T, chunk []byte, rows uint16) {
		c := walkChunk{name: "x", start: 0, end: int64(len(chunk)), rows: int64(rows)}
		w := &leafWalk{}
		err := w.walkTo(context.Background(), bytes.NewReader(chunk), c, int64(rows))
		if err != nil {
			if !errors.Is(err, formats.ErrCorrupt) {
				t.Fatalf("an error that is not ErrCorrupt: %v", err)
			}
			return
		}
		if w.unusable {
			return
		}
		at, sum := int64(0), int64(0)
		for _, p := range w.pages {
			if p.offset != at || p.size <= 0 || p.offset+p.size > c.end || p.firstRow < sum || (sum == 0 && p.firstRow != 0) {
				t.Fatalf("page %+v after %d bytes and %d rows", p, at, sum)
			}
			at, sum = at+p.size, p.firstRow+1
		}
		if w.rows > c.rows || (w.done && w.rows != c.rows) {
			t.Fatalf("pages of %d rows, done %v, in a row group of %d", w.rows, w.done, c.rows)
		}
		if len(w.pages) == 0 {
			return
		}
		pages, _, dict, done, err := decodeWalk(w.encode(), c)
		if err != nil || !slices.Equal(pages, w.pages) || done != w.done || dict != w.dictPages {
			t.Fatalf("the cache's encoding does not round-trip: %v", err)
		}
		got, err := parseOffsetIndex(appendOffsetIndex(nil, w.pages))
		if err != nil || !slices.Equal(got, w.pages) {
			t.Fatalf("the offset index does not round-trip: %v", err)
		}
	})
}

// FuzzWalkCache: a walk as the plan's cache or a shared plan holds it comes
// from storage, so any bytes may arrive. decodeWalk never panics, and what
// it accepts describes the chunk: pages one after another from
// data_page_offset, inside the chunk, of positive sizes, holding the row
// group's rows if done and fewer if not. The fuzzer makes the bytes before
// the checksum, which the target appends: else nearly every input would
// fail the checksum and no other check be tried.
func FuzzWalkCache(f *testing.F) {
	for _, v2 := range []bool{false, true} {
		data, pages := idPages(f, 300, v2)
		c := chunkOf(data, pages, 300)
		w := &leafWalk{next: c.start}
		if err := w.walkTo(context.Background(), bytes.NewReader(data), c, 150); err != nil {
			f.Fatal(err)
		}
		enc := w.encode()
		f.Add(enc[:len(enc)-4], c.start, c.end, c.dataOffset, c.rows)
	}
	f.Add([]byte{walkVersion, 1, 1, 0, 10, 6}, int64(4), int64(100), int64(4), int64(3))
	f.Add([]byte{walkVersion, 1, 1, 1, 10, 6}, int64(4), int64(100), int64(4), int64(3))
	f.Fuzz(func(t *testing.T, body []byte, start, end, dataOffset, rows int64) {
		if start < 0 || end < start || dataOffset < start || rows < 0 {
			return
		}
		b := binary.LittleEndian.AppendUint32(slices.Clone(body), crc32.ChecksumIEEE(body))
		c := walkChunk{name: "x", start: start, end: end, dataOffset: dataOffset, rows: rows}
		pages, n, dict, done, err := decodeWalk(b, c)
		if err != nil {
			return
		}
		if dict < 0 || dict > len(pages) {
			t.Fatalf("%d pages up to the dictionary's last of %d pages", dict, len(pages))
		}
		at := dataOffset
		for i, p := range pages {
			first := i == 0 && p.firstRow != 0
			if first || (i > 0 && p.firstRow <= pages[i-1].firstRow) || p.offset != at || p.size <= 0 || p.offset+p.size > end || p.firstRow >= n {
				t.Fatalf("page %d %+v after byte %d, of pages of %d rows", i, p, at, n)
			}
			at += p.size
		}
		if n > rows || n <= 0 || done != (n == rows) {
			t.Fatalf("pages of %d rows, done %v, in a row group of %d", n, done, rows)
		}
	})
}

// A walk in the plan's cache that says no page needs the dictionary where
// they all do has the dictionary left out of a fetch: the pages' headers
// give it away, and the read fails as with a walk that lies of its rows,
// never with other values.
func TestWalkCacheLyingOfTheDictionary(t *testing.T) {
	old := walkMinBytes
	walkMinBytes = 0
	defer func() { walkMinBytes = old }()
	const n = 20_000
	b := array.NewInt64Builder(memory.DefaultAllocator)
	defer b.Release()
	for i := range n {
		b.Append(int64(i % 10))
	}
	ks := b.NewArray()
	defer ks.Release()
	rec := array.NewRecordBatch(arrow.NewSchema([]arrow.Field{{Name: "k", Type: arrow.PrimitiveTypes.Int64}}, nil), []arrow.Array{ks}, n)
	defer rec.Release()
	var out bytes.Buffer
	props := pq.NewWriterProperties(pq.WithDataPageSize(256), pq.WithBatchSize(64))
	w, err := pqarrow.NewFileWriter(rec.Schema(), &out, props, pqarrow.DefaultWriterProps())
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "dict.parquet")
	if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	read := func(cache formats.Cache, lo, hi int64) ([]int64, error) { return readInt64s(t, path, cache, lo, hi) }
	cache := &formats.MemoryCache{}
	got, err := read(cache, n-2, n)
	if err != nil || !slices.Equal(got, []int64{(n - 2) % 10, (n - 1) % 10}) {
		t.Fatalf("rows [%d, %d): %v, %v", n-2, n, got, err)
	}
	var key string
	for _, k := range cache.Keys() {
		if strings.HasPrefix(k, "parquet-pages") {
			key = k
		}
	}
	enc, err := cache.Get(context.Background(), []byte(key))
	if err != nil || len(enc) < 8 || enc[0] != walkVersion || enc[1] != 1 {
		t.Fatalf("the walk in the cache: % x, %v", enc, err)
	}
	// version, done, page count, pages up to the dictionary's last: make
	// that none.
	pages, w1 := binary.Uvarint(enc[2:])
	dict, w2 := binary.Uvarint(enc[2+w1:])
	if pages < 10 || dict != pages {
		t.Fatalf("the walk says %d pages up to the dictionary's last of %d, want all of 10 or more", dict, pages)
	}
	lie := slices.Concat(enc[:2+w1], []byte{0}, enc[2+w1+w2:len(enc)-4])
	lie = binary.LittleEndian.AppendUint32(lie, crc32.ChecksumIEEE(lie))
	_ = cache.Set(context.Background(), []byte(key), lie)
	if got, err := read(cache, n/2, n/2+300); err == nil || !errors.Is(err, formats.ErrCorrupt) || !strings.Contains(err.Error(), "past the dictionary's pages") {
		t.Errorf("a walk lying of the dictionary: rows [%d, %d) read as %d rows, %v; want an error", n/2, n/2+300, len(got), err)
	}
	_ = cache.Set(context.Background(), []byte(key), enc)
	want := make([]int64, 300)
	for i := range want {
		want[i] = int64((n/2 + i) % 10)
	}
	if got, err := read(cache, n/2, n/2+300); err != nil || !slices.Equal(got, want) {
		t.Errorf("the walk as it was: rows [%d, %d): %v", n/2, n/2+300, err)
	}
}

// readInt64s plans path with cache and reads rows [lo, hi) of its first
// column, an int64.
func readInt64s(t *testing.T, path string, cache formats.Cache, lo, hi int64) ([]int64, error) {
	t.Helper()
	ds, err := planParquet(context.Background(), []string{path}, formats.PlanOptions{Cache: cache})
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	var out []int64
	err = ds.Read(context.Background(), 0, ds.RowRange(0, lo, hi), 100, nil, func(rec arrow.RecordBatch) error {
		out = append(out, rec.Column(0).(*array.Int64).Int64Values()...)
		rec.Release()
		return nil
	})
	return out, err
}
