package parquet

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"sync"

	"github.com/apache/arrow-go/v18/parquet/metadata"

	"github.com/sluicedata/sluice/formats"
	"github.com/sluicedata/sluice/formats/parquet/internal/thrift"
)

// Where a split boundary cuts a row group, each side needs only some of its
// rows. With the file's offset index (the page index's page locations) a
// read fetches only the pages that hold those rows, and the dictionary page,
// instead of whole column chunks: the bytes of a row group cut by a boundary
// are then fetched about once across ranks, not once per rank. arrow-go
// decodes such a chunk from a buffer in which only the fetched pages are
// filled: it seeks to the first needed page with the same offset index and
// reads exactly the rows asked for, so it never parses the rest. Where the
// file has no offset index, a walk of the page headers makes one (walk.go).

// pageLoc is one data page of a column chunk, from the offset index.
type pageLoc struct {
	offset   int64
	size     int64 // compressed, header included
	firstRow int64
}

// rowGroupIndex is the offset index of one row group: the bytes arrow-go
// reads when it seeks (the offset indexes of all the row group's columns,
// which writers store together), and each selected leaf's pages.
type rowGroupIndex struct {
	rg    int
	at    int64
	bytes []byte
	pages map[int][]pageLoc // by leaf
	// Set where the index was made by walking page headers (walkedIndex):
	// rows is the rows each leaf's pages hold (the row group's where a
	// leaf is absent), and virtual where arrow-go is to find each leaf's
	// offset index, past the end of the file.
	rows    map[int]int64
	virtual map[int]metadata.IndexLocation
	// dictPages is, by leaf, the data pages up to the last whose header
	// gives an encoding that may need the dictionary: the pages after
	// them are read without it. Only a walk knows (it read the headers);
	// a leaf absent may need it on every page.
	dictPages map[int]int
}

// offsetIndexes caches, per file, the row groups' offset indexes read so
// far: a file's row groups are cut by boundaries again in every epoch.
type offsetIndexes struct {
	mu sync.Mutex
	rg map[int]*rowGroupIndex
	// raw holds the offset index bytes of row groups that the footer's
	// speculative read brought in, not yet parsed.
	raw map[int][]byte
}

// keep takes the offset indexes that lie in tail, the bytes read before the
// footer of a file of size bytes: no request is needed for them later.
func (x *offsetIndexes) keep(md *metadata.FileMetaData, size int64, tail []byte) {
	base := size - int64(len(tail))
	for rg := range md.NumRowGroups() {
		from, to, ok := offsetIndexRange(md.RowGroup(rg))
		if !ok || from < base || to > size || from > to {
			continue
		}
		if x.raw == nil {
			x.raw = map[int][]byte{}
		}
		x.raw[rg] = append([]byte(nil), tail[from-base:to-base]...)
	}
}

// offsetIndexRange is where the offset indexes of row group rg lie, as
// arrow-go computes it for a row group's page index reader (every column's,
// not only the selected ones), or ok false if some column has none.
func offsetIndexRange(rg *metadata.RowGroupMetaData) (from, to int64, ok bool) {
	from, to = math.MaxInt64, 0
	for c := range rg.NumColumns() {
		loc, has := rg.OffsetIndexLocation(c)
		if !has {
			return 0, 0, false
		}
		from = min(from, loc.Offset)
		to = max(to, loc.Offset+int64(loc.Length))
	}
	return from, to, rg.NumColumns() > 0
}

// rowGroupIndex returns row group rg's offset index, reading it on first
// need, or nil if the row group has none or it cannot serve page reads (an
// index that does not describe its chunk is ignored, not trusted).
func (m *parquetMeta) rowGroupIndex(ctx context.Context, f *formats.Fragment, rg int, leaves []int) (*rowGroupIndex, error) {
	m.index.mu.Lock()
	defer m.index.mu.Unlock()
	if ix, ok := m.index.rg[rg]; ok {
		return ix, nil
	}
	if m.index.rg == nil {
		m.index.rg = map[int]*rowGroupIndex{}
	}
	g := m.md.RowGroup(rg)
	from, to, ok := offsetIndexRange(g)
	if !ok || from < 0 || to > f.Size || to-from > 64<<20 {
		m.index.rg[rg] = nil
		return nil, nil
	}
	ix := &rowGroupIndex{rg: rg, at: from, bytes: m.index.raw[rg], pages: map[int][]pageLoc{}}
	delete(m.index.raw, rg)
	if int64(len(ix.bytes)) != to-from {
		ix.bytes = make([]byte, to-from)
		if _, err := f.Source.ReaderAt(ctx).ReadAt(ix.bytes, from); err != nil {
			return nil, err // not cached: a failed read is retried by the next
		}
	}
	for _, leaf := range leaves {
		pages, err := ix.leafPages(g, leaf)
		if err != nil || pages == nil {
			m.index.rg[rg] = nil // arrow-go could not seek with it either
			return nil, nil
		}
		ix.pages[leaf] = pages
	}
	m.index.rg[rg] = ix
	return ix, nil
}

// leafPages parses and checks the pages of one leaf's chunk.
func (ix *rowGroupIndex) leafPages(g *metadata.RowGroupMetaData, leaf int) ([]pageLoc, error) {
	loc, _ := g.OffsetIndexLocation(leaf)
	lo := loc.Offset - ix.at
	pages, err := parseOffsetIndex(ix.bytes[lo : lo+int64(loc.Length)])
	if err != nil {
		return nil, err
	}
	cc, err := g.ColumnChunk(leaf)
	if err != nil {
		return nil, err
	}
	start, end := chunkSpan(cc)
	if len(pages) == 0 || pages[0].firstRow != 0 || pages[0].offset != cc.DataPageOffset() {
		return nil, nil
	}
	if cc.HasDictionaryPage() && cc.DictionaryPageOffset() <= 0 && pages[0].offset > start {
		// An old writer's dictionary page that arrow-go finds only by
		// reading from the chunk's start.
		return nil, nil
	}
	for i, p := range pages {
		if p.size <= 0 || p.offset < start || p.offset+p.size > end || (i > 0 && (p.offset < pages[i-1].offset+pages[i-1].size || p.firstRow <= pages[i-1].firstRow)) {
			return nil, nil
		}
	}
	if pages[len(pages)-1].firstRow >= g.NumRows() {
		return nil, nil
	}
	return pages, nil
}

// chunkSpan is where a column chunk lies, as arrow-go reads it.
func chunkSpan(cc *metadata.ColumnChunkMetaData) (start, end int64) {
	start = cc.DataPageOffset()
	if cc.HasDictionaryPage() && cc.DictionaryPageOffset() > 0 && cc.DictionaryPageOffset() < start {
		start = cc.DictionaryPageOffset()
	}
	return start, start + cc.TotalCompressedSize()
}

// pageRanges returns the byte ranges of rows [lo, hi) of a chunk: the
// dictionary page, if any, unless head is false, and the data pages that
// hold those rows.
func pageRanges(cc *metadata.ColumnChunkMetaData, pages []pageLoc, lo, hi int64, head bool) []byteRange {
	start, _ := chunkSpan(cc)
	var out []byteRange
	if head && pages[0].offset > start {
		out = append(out, byteRange{start, pages[0].offset})
	}
	first, last := pagesOf(pages, lo, hi)
	for _, p := range pages[first:last] {
		out = append(out, byteRange{p.offset, p.offset + p.size})
	}
	return out
}

// pagesOf is the pages [first, last) that rows [lo, hi) lie in.
func pagesOf(pages []pageLoc, lo, hi int64) (first, last int) {
	first = max(sort.Search(len(pages), func(i int) bool { return pages[i].firstRow > lo })-1, 0)
	last = sort.Search(len(pages), func(i int) bool { return pages[i].firstRow >= hi })
	return first, last
}

// headless reports whether a fetch of rows [lo, hi) of leaf's chunk may
// leave out the bytes before its first data page, its dictionary page:
// the walk read the header of every page the rows lie in and found none
// that may need the dictionary (past the writer's fall back from a full
// dictionary to PLAIN), and the read's own decoder takes every column
// (ownDecodes): arrow-go reads the dictionary at the chunk's start
// whatever the pages need. The pages' headers are checked to say so
// (checkPages); where the own decoder declines the pages all the same,
// the bytes left out are fetched then (chunkReader.ReadAt).
func (ix *rowGroupIndex) headless(leaf int, lo, hi int64, ownDecodes bool) bool {
	dict, ok := ix.dictPages[leaf]
	if !ok || !ownDecodes {
		return false
	}
	first, _ := pagesOf(ix.pages[leaf], lo, hi)
	return first >= dict
}

// parseOffsetIndex reads a Thrift OffsetIndex: its page_locations (field
// 1), each a PageLocation {1: offset i64, 2: compressed_page_size i32, 3:
// first_row_index i64}. Other fields (unencoded sizes) are skipped.
func parseOffsetIndex(b []byte) ([]pageLoc, error) {
	s := thrift.NewReader(b)
	var out []pageLoc
	err := s.Fields(0, func(id int16, typ byte) error {
		if id != 1 || typ != thrift.List {
			return s.Skip(typ, 1)
		}
		n, elem, err := s.ListHeader()
		if err != nil {
			return err
		}
		if elem != thrift.Struct {
			return fmt.Errorf("offset index: page locations of type %d", elem)
		}
		out = make([]pageLoc, 0, n)
		for range n {
			var p pageLoc
			err := s.Fields(2, func(id int16, typ byte) error {
				if typ != thrift.I32 && typ != thrift.I64 {
					return s.Skip(typ, 3)
				}
				v, err := s.Varint()
				switch id {
				case 1:
					p.offset = v
				case 2:
					p.size = v
				case 3:
					p.firstRow = v
				}
				return err
			})
			if err != nil {
				return err
			}
			out = append(out, p)
		}
		return nil
	})
	return out, err
}

// expectPages returns the byte ranges of rows [lo, hi) of row group rg's
// selected leaves, page by page, and records what reading them needs.
func (fe *parquetFetched) expectPages(meta *parquetMeta, rg int, ix *rowGroupIndex, lo, hi int64) ([]byteRange, error) {
	g := meta.md.RowGroup(rg)
	if fe.paged == nil {
		fe.paged, fe.partial = map[int]bool{}, map[int64]bool{}
	}
	fe.paged[rg] = true
	var out []byteRange
	for _, leaf := range fe.leaves {
		cc, err := g.ColumnChunk(leaf)
		if err != nil {
			return nil, err
		}
		start, end := chunkSpan(cc)
		if d := cc.DictionaryPageOffset(); cc.HasDictionaryPage() && d > cc.DataPageOffset() {
			// arrow-go reads such a dictionary, which it needs after a
			// seek, into a buffer of negative size: a panic.
			return nil, fmt.Errorf("column %q: the dictionary page at byte %d lies after the data pages at %d", meta.md.Schema.Column(leaf).ColumnPath().String(), d, cc.DataPageOffset())
		}
		meta.expectChunk(fe.chunks, start, leaf, cc.NumValues())
		if meta.md.Schema.Column(leaf).MaxRepetitionLevel() > 0 {
			// arrow-go's seek miscounts levels in repeated columns: these
			// are read from their start, so fetched whole.
			out = append(out, byteRange{start, end})
			continue
		}
		fe.partial[start] = true
		pages := ix.pages[leaf]
		headless := ix.headless(leaf, lo, hi, fe.ownDecodes) && pages[0].offset > start
		out = append(out, pageRanges(cc, pages, lo, hi, !headless)...)
		fe.recordPages(start, g.NumRows(), ix, leaf, lo, hi)
		if headless {
			if fe.leftOut == nil {
				fe.leftOut = map[int64]byteRange{}
			}
			fe.leftOut[start] = byteRange{start, pages[0].offset}
		}
		// The seek trusts the index: each fetched page's header must hold
		// the rows the index says it does (checkPages).
		for i, p := range pages {
			if p.firstRow >= hi || (i+1 < len(pages) && pages[i+1].firstRow <= lo) {
				continue
			}
			end := g.NumRows()
			if r, ok := ix.rows[leaf]; ok {
				end = r // a walk stops at the rows its reads need
			}
			if i+1 < len(pages) {
				end = pages[i+1].firstRow
			}
			fe.checks = append(fe.checks, pageCheck{offset: p.offset, size: p.size, rows: end - p.firstRow, noDict: headless, chunk: fe.chunks[start]})
		}
	}
	return out, nil
}

// fetchedPages are the pages pageRanges fetches of a column chunk: the
// bytes before its first data page (its dictionary page, if any), then
// data pages from the one holding row lo to the one holding row hi-1.
type fetchedPages struct {
	head  byteRange // empty where the first data page starts the chunk
	pages []pageLoc
	first int   // the first page's number among the chunk's data pages
	end   int64 // the row after the last page's
}

// within is the fetched pages [from, to) that rows [lo, hi) of the row
// group lie in, and the row after the last of them; all of them where
// the rows do not lie in the pages (the read then fails on its rows).
func (fp fetchedPages) within(lo, hi int64) (from, to int, end int64) {
	from = max(sort.Search(len(fp.pages), func(i int) bool { return fp.pages[i].firstRow > lo })-1, 0)
	to = sort.Search(len(fp.pages), func(i int) bool { return fp.pages[i].firstRow >= hi })
	if lo < fp.pages[0].firstRow || hi > fp.end || from >= to {
		return 0, len(fp.pages), fp.end
	}
	return from, to, fp.pageEnd(to - 1)
}

// pageEnd is the row after fetched page k's last.
func (fp fetchedPages) pageEnd(k int) int64 {
	if k+1 < len(fp.pages) {
		return fp.pages[k+1].firstRow
	}
	return fp.end
}

// recordPages records the pages of leaf's chunk at start that
// expectPages fetches for rows [lo, hi) of a row group of rows rows.
func (fe *parquetFetched) recordPages(start, rows int64, ix *rowGroupIndex, leaf int, lo, hi int64) {
	pages := ix.pages[leaf]
	first, last := pagesOf(pages, lo, hi)
	if first >= last {
		return
	}
	end := rows
	if r, ok := ix.rows[leaf]; ok {
		end = r
	}
	if last < len(pages) {
		end = pages[last].firstRow
	}
	if fe.fetchedPages == nil {
		fe.fetchedPages = map[int64]fetchedPages{}
	}
	fe.fetchedPages[start] = fetchedPages{head: byteRange{start, pages[0].offset}, pages: pages[first:last], first: first, end: end}
}

// pageCheck is a data page of size bytes (its header included) whose
// header must hold rows rows, and, where noDict is set, an encoding that
// needs no dictionary (its chunk's was left out: see headless).
type pageCheck struct {
	offset, size, rows int64
	noDict             bool
	chunk              chunkCheck
}

// checkPages checks that the fetched data pages hold the rows the offset
// index says (a seek by an index that lies would deliver other rows than
// asked, silently), and their headers as checkChunk checks a whole chunk's.
func (fe *parquetFetched) checkPages() error {
	r := chunkReader{spans: fe.spans}
	for _, c := range fe.checks {
		// The header's statistics may be long: up to the whole page. It is
		// parsed where it was fetched, not copied: a copy of up to 64 KiB
		// a page was a tenth of a paged read's CPU outside decoding.
		head := r.fetchedAt(c.offset, min(max(c.size, 1), 64<<10))
		name := c.chunk.col.ColumnPath().String()
		rows, err := pageRows(head)
		if err != nil {
			return fmt.Errorf("column %q: corrupt page at byte %d: %w", name, c.offset, err)
		}
		if rows != c.rows {
			return fmt.Errorf("column %q: the offset index gives the page at byte %d %d rows, its header %d", name, c.offset, c.rows, rows)
		}
		h, err := thrift.ParsePageHeader(head)
		if err == nil {
			if err := checkHeader(&h, c.chunk, c.size-int64(h.Size)); err != nil {
				return pageError(c.chunk, c.offset, err)
			}
		}
		if c.noDict && err == nil && mayUseDictionary(h.Encoding) {
			// The walk that left the dictionary out said otherwise. (A
			// header too long to parse here is left to the decoder, which
			// declines dictionary indices without a dictionary.)
			return fmt.Errorf("column %q: the page walk found the page at byte %d past the dictionary's pages, its header gives encoding %d", name, c.offset, h.Encoding)
		}
	}
	return nil
}

// pageRows reads the row count of a data page from its header: num_values
// of a version 1 page (one per row in a column without repetition), or
// num_rows of a version 2 page.
func pageRows(b []byte) (int64, error) {
	s := thrift.NewReader(b)
	rows := int64(-1)
	err := s.Fields(0, func(id int16, typ byte) error {
		if typ != thrift.Struct || (id != 5 && id != 8) {
			return s.Skip(typ, 1)
		}
		want := int16(1) // DataPageHeader.num_values
		if id == 8 {
			want = 3 // DataPageHeaderV2.num_rows
		}
		return s.Fields(1, func(fid int16, ftyp byte) error {
			if fid == want && ftyp == thrift.I32 {
				var err error
				rows, err = s.Varint()
				return err
			}
			return s.Skip(ftyp, 2)
		})
	})
	if rows < 0 && err == nil {
		err = errors.New("not a data page")
	}
	if rows >= 0 {
		return rows, nil // the header's tail may lie past the bytes read
	}
	return rows, err
}

// fill fills p, a whole column chunk at off, from the spans that lie in it,
// with zeros between them. It reports whether some span did.
func (r *chunkReader) fill(p []byte, off int64) bool {
	clear(p)
	end := off + int64(len(p))
	i := sort.Search(len(r.spans), func(i int) bool { return r.spans[i].off+int64(len(r.spans[i].data)) > off })
	any := false
	for ; i < len(r.spans) && r.spans[i].off < end; i++ {
		sp := r.spans[i]
		from, to := max(sp.off, off), min(sp.off+int64(len(sp.data)), end)
		copy(p[from-off:to-off], sp.data[from-sp.off:to-sp.off])
		any = true
	}
	return any
}
