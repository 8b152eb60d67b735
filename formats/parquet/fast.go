package parquet

import (
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/metadata"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/sluicedata/sluice/formats"
	"github.com/sluicedata/sluice/formats/internal/panics"
	"github.com/sluicedata/sluice/formats/parquet/internal/flatdecode"
)

// A whole row group read decodes its flat columns of the common types
// (top-level, not repeated; integers, dates, times, timestamps, floats,
// booleans, strings, binaries, fixed-size binaries and UUIDs) with
// flatdecode instead of arrow-go:
// straight from the fetched chunk into the batch's Arrow buffers. Which
// decoder reads a column chunk is decided before any of it is decoded
// (flatdecode.Open reads all its page headers): anything else, and every
// chunk flatdecode refuses, is arrow-go's, so the batches are those
// arrow-go would have built, value for value and type for type.

// fastChunks counts the column chunks flatdecode decoded, for the tests
// that check the comparison with arrow-go is not empty.
var fastChunks atomic.Int64

// pagedChunks counts those of them read from pages fetched one by one.
var pagedChunks atomic.Int64

// declinePaged, set by tests, has flatdecode decline every row group
// fetched page by page, as it declines pages of a shape it does not read:
// arrow-go reads them instead (readPages).
var declinePaged atomic.Bool

// mixedColumns reads a row group's columns, each with flatdecode or
// arrow-go.
type mixedColumns struct {
	schema *arrow.Schema // as arrow-go's record reader has it
	fast   []*flatdecode.Reader
	// firsts are the rows the fast readers of a paged read start at.
	firsts []int64
	slow   []*pqarrow.ColumnReader // where fast is nil
	batch  int64
	mem    memory.Allocator
	known  *knownUTF8 // where next puts the columns flatdecode found UTF-8
	spread bool       // next may decode the fast columns on idle cores
	waited func() bool
}

// spreadBatches counts the batches next decoded on more than one
// goroutine, for the tests.
var spreadBatches atomic.Int64

// decoding counts the Decode calls under way in the process, which share
// its cores.
var decoding atomic.Int64

// minSpread is the fewest rows of a batch whose columns are worth
// decoding on more than one goroutine.
const minSpread = 1024

// workers is how many goroutines next decodes the n-row batch's fast
// columns on: up to a Decode call's share of the cores, or up to all of
// them where the reader waits for this decode (formats.WithWaited). The
// waited-for decode's goroutines then queue for the cores beside the
// other decodes' and take them as those yield them (Go preempts a
// goroutine after 10 ms): it ends sooner where its batches are long or
// cores come free, and what the reader takes next comes first.
func (m *mixedColumns) workers(n int64) int {
	k := 0
	for _, f := range m.fast {
		if f != nil {
			k++
		}
	}
	if !m.spread || k < 2 || n < minSpread {
		return 1
	}
	if m.waited != nil && m.waited() {
		return min(k, runtime.GOMAXPROCS(0))
	}
	return min(k, runtime.GOMAXPROCS(0)/int(max(decoding.Load(), 1)))
}

// nextFast decodes the next n rows of each fast column into arrs, on w
// goroutines (the calling one included), all joined before it returns,
// the columns in turns (see turns). The error is that of the first column
// that failed.
func (m *mixedColumns) nextFast(n int64, arrs []arrow.Array, w int) error {
	errs := make([]error, len(m.fast))
	t := newTurns(m.fast, func(int) int64 { return n })
	work := func() {
		for i, ok := t.next(); ok; i, ok = t.next() {
			if w == 1 {
				// On the decode's own goroutine, guardRowGroup recovers
				// a panic.
				arrs[i], errs[i] = m.fast[i].Next(int(n))
				continue
			}
			arrs[i], errs[i] = nextGuarded(m.fast[i], n)
		}
	}
	if w > 1 {
		spreadBatches.Add(1)
	}
	var wg sync.WaitGroup
	for range w - 1 {
		wg.Go(work)
	}
	work()
	wg.Wait()
	for i, err := range errs {
		var pe *panics.Error
		if errors.As(err, &pe) {
			return fmt.Errorf("%w: column %q: %w", formats.ErrCorrupt, m.schema.Field(i).Name, err)
		}
		if err != nil {
			return fmt.Errorf("%w: %w", formats.ErrCorrupt, err)
		}
		if m.known != nil && m.fast[i] != nil && m.fast[i].ValidUTF8() {
			m.known.add(arrs[i])
		}
	}
	return nil
}

// turns hands out the fast columns of a batch, each once, to the
// goroutines that decode them. Where a large row group is read a window
// at a time, two windows that start in the same pages share those pages'
// decompressed bodies (flatdecode.Bodies): the first to reach a page
// decompresses it and the other waits. Decoded at once, and each taking
// its columns in the schema's order, they reached each column's page
// together, and one window waited out the pages the other decompressed
// (0.18 s a pass of half a second in a sequential read of pyarrow's row
// groups). So a column whose reader would wait (flatdecode.Reader.Waits)
// is left for later while another is left that would not: the two
// decompress different pages at once. The order changes no value.
type turns struct {
	mu   sync.Mutex
	fast []*flatdecode.Reader
	rows func(i int) int64 // the rows column i reads
	left []int             // the columns not yet handed out, in the schema's order
}

func newTurns(fast []*flatdecode.Reader, rows func(i int) int64) *turns {
	t := &turns{fast: fast, rows: rows}
	for i, f := range fast {
		if f != nil {
			t.left = append(t.left, i)
		}
	}
	return t
}

// next is the column to decode next: of those left, the first whose
// reader would not wait, or the first if all would; false once none is
// left.
func (t *turns) next() (int, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.left) == 0 {
		return 0, false
	}
	k := 0
	for j, i := range t.left {
		if !t.fast[i].Waits(t.rows(i)) {
			k = j
			break
		}
	}
	i := t.left[k]
	t.left = slices.Delete(t.left, k, k+1)
	return i, true
}

// nextGuarded is f.Next(n), a panic of which is an error: on a goroutine
// of nextFast's, no guardRowGroup is there to recover it.
func nextGuarded(f *flatdecode.Reader, n int64) (a arrow.Array, err error) {
	defer func() {
		if r := recover(); r != nil {
			a, err = nil, panics.New(r)
		}
	}()
	return f.Next(int(n))
}

func (m *mixedColumns) release() {
	for _, c := range m.slow {
		if c != nil {
			c.Release()
		}
	}
	for _, f := range m.fast {
		if f != nil {
			f.Release()
		}
	}
}

// openColumns opens a reader for each top-level field of the read's
// leaves in row group g: flatdecode's where it takes the chunk, arrow-go's
// elsewhere. It returns nil if flatdecode takes none.
func (d *rowGroupReader) openColumns(g rowGroup) (*mixedColumns, error) {
	fr, leaves := d.fr, d.fe.leaves
	fields, err := fr.Manifest.GetFieldIndices(leaves)
	if err != nil {
		return nil, nil // arrow-go reports it
	}
	m := d.newMixed(len(fields))
	out := make([]arrow.Field, len(fields))
	var slowLeaves []int
	taken := false
	for i, fidx := range fields {
		sf := &fr.Manifest.Fields[fidx]
		out[i] = *sf.Field
		r, declined := d.openFlat(g, sf)
		if r != nil {
			m.fast[i], taken = r, true
			out[i].Type = r.Type()
			continue
		}
		if sf.IsLeaf() && d.meta.ownOnly[sf.ColIndex] {
			m.release()
			return nil, fmt.Errorf("%w: column %q is FIXED_LEN_BYTE_ARRAY in DELTA_BYTE_ARRAY encoding, which only sluice's own decoder reads, and it does not read this chunk: %v", formats.ErrCorrupt, sf.Field.Name, declined)
		}
		for _, leaf := range leafIndices(sf, nil) {
			if i := sort.SearchInts(leaves, leaf); i < len(leaves) && leaves[i] == leaf {
				slowLeaves = append(slowLeaves, leaf)
			}
		}
	}
	if !taken {
		return nil, nil
	}
	if len(slowLeaves) > 0 {
		readers, _, err := fr.GetFieldReaders(d.ctx, slowLeaves, []int{g.index})
		if err != nil {
			m.release()
			return nil, fmt.Errorf("%w: %w", formats.ErrCorrupt, err)
		}
		j := 0
		for i := range fields {
			if m.fast[i] != nil {
				continue
			}
			if j == len(readers) {
				for _, r := range readers {
					r.Release()
				}
				return nil, fmt.Errorf("%w: %d column readers for %d fields", formats.ErrCorrupt, len(readers), len(fields))
			}
			m.slow[i] = readers[j]
			out[i] = *readers[j].Field()
			j++
		}
	}
	m.schema = arrow.NewSchema(out, fr.Manifest.SchemaMeta)
	m.batch = fr.Props.BatchSize
	if m.batch <= 0 {
		m.batch = g.rows
	}
	m.batch = max(m.batch, 1)
	fastChunks.Add(int64(len(fields) - len(slowLeaves)))
	return m, nil
}

// newMixed returns a mixedColumns for n fields, no reader opened yet.
func (d *rowGroupReader) newMixed(n int) *mixedColumns {
	m := &mixedColumns{fast: make([]*flatdecode.Reader, n), slow: make([]*pqarrow.ColumnReader, n), mem: d.mem}
	m.known, m.spread, m.waited = d.known, d.spread, d.waited
	return m
}

// waited reports whether the reader waits for this decode now
// (formats.WithWaited): its columns are then spread whatever the other
// decodes.
func (d *rowGroupReader) waited() bool { return formats.Waited(d.ctx) }

// openFlat returns a flatdecode reader for field sf's chunk in row group
// g, or nil and why where the chunk is arrow-go's: a field that is not a
// flat column of a type flatdecode builds as arrow-go does (see
// flatColumn), a chunk not wholly in the fetched bytes, or one whose pages
// Open refuses.
func (d *rowGroupReader) openFlat(g rowGroup, sf *pqarrow.SchemaField) (*flatdecode.Reader, error) {
	col, start, end, ok := d.flatColumn(g.index, sf)
	if !ok {
		return nil, errors.New("not a flat column of a type it reads")
	}
	chunk := d.src.span(start, end)
	if chunk == nil {
		return nil, errors.New("the chunk was fetched in part")
	}
	col.Rows = g.rows
	r, err := flatdecode.Open(chunk, col, d.mem)
	if err != nil {
		slog.Debug("parquet: column chunk left to arrow-go", "row_group", g.index, "reason", err)
		return nil, err
	}
	return r, nil
}

// flatColumn describes field sf's chunk in row group rg to flatdecode
// (Rows unset), with the chunk's bytes [start, end) in the file; ok is
// false for a field that is not a flat column of a type flatdecode builds
// as arrow-go does, or one arrow-go reads as another type (see readAs)
// but a FIXED_LEN_BYTE_ARRAY in DELTA_BYTE_ARRAY, which flatdecode reads
// as what it is, into the column's type: project then leaves it be.
func (d *rowGroupReader) flatColumn(rg int, sf *pqarrow.SchemaField) (col flatdecode.Column, start, end int64, ok bool) {
	md, typ, ok := d.meta.flatLeaf(sf, d.fr.ParquetReader().MetaData())
	if !ok {
		return col, 0, 0, false
	}
	c := md.Schema.Column(sf.ColIndex)
	cc, err := md.RowGroup(rg).ColumnChunk(sf.ColIndex)
	if err != nil {
		return col, 0, 0, false
	}
	start, end = chunkSpan(cc)
	return flatdecode.Column{
		Name:     c.ColumnPath().String(),
		Offset:   start,
		Physical: flatdecode.Physical(c.PhysicalType()),
		Type:     typ,
		Optional: c.MaxDefinitionLevel() == 1,
		Codec:    flatdecode.Codec(cc.Compression()),
		Values:   cc.NumValues(),
		MaxPage:  cc.TotalUncompressedSize(),
	}, start, end, true
}

// flatLeaf is, for field sf, the metadata that describes its chunks to
// flatdecode (readMD, arrow-go's, or the file's own for a column arrow-go
// reads as another type) and the Arrow type flatdecode builds them as; ok
// is false where sf is not a flat column of a type flatdecode builds as
// arrow-go does (see flatColumn).
func (m *parquetMeta) flatLeaf(sf *pqarrow.SchemaField, readMD *metadata.FileMetaData) (md *metadata.FileMetaData, typ arrow.DataType, ok bool) {
	if !sf.IsLeaf() {
		return nil, nil, false
	}
	md, typ = readMD, sf.Field.Type
	if conv, ok := m.convert[sf.Field.Name]; ok {
		if conv.kind != convFixed {
			return nil, nil, false
		}
		md, typ = m.md, conv.to // arrow-go's metadata says BYTE_ARRAY
	}
	c := md.Schema.Column(sf.ColIndex)
	if c.MaxRepetitionLevel() != 0 || c.MaxDefinitionLevel() > 1 || !flatdecode.Supports(flatdecode.Physical(c.PhysicalType()), typ) {
		return nil, nil, false
	}
	return md, typ, true
}

// ownDecodes reports whether flatdecode reads every one of leaves (as
// far as the schema says: it may still decline a chunk's pages).
func (m *parquetMeta) ownDecodes(leaves []int) bool {
	for _, l := range leaves {
		if !m.flat[l] {
			return false
		}
	}
	return len(leaves) > 0
}

// openPaged opens a flatdecode reader on the fetched pages of each
// top-level field of the read's leaves in row group g, fetched page by
// page, each starting at the first row of its first fetched page (columns'
// pages start on rows of their own). It returns nil unless flatdecode
// takes every field: the row group is then readPages'.
func (d *rowGroupReader) openPaged(g rowGroup) *mixedColumns {
	if declinePaged.Load() {
		return nil
	}
	fr, src := d.fr, d.src
	fields, err := fr.Manifest.GetFieldIndices(d.fe.leaves)
	if err != nil || len(fields) == 0 {
		return nil
	}
	m := d.newMixed(len(fields))
	opened := false
	defer func() {
		if !opened {
			// A later field refused: the readers of the fields before it
			// hand their buffers back, as the row group goes to readPages.
			m.release()
		}
	}()
	out := make([]arrow.Field, len(fields))
	m.firsts = make([]int64, len(fields))
	for i, fidx := range fields {
		sf := &fr.Manifest.Fields[fidx]
		out[i] = *sf.Field
		col, start, _, ok := d.flatColumn(g.index, sf)
		if !ok {
			return nil
		}
		fp, ok := d.fe.fetchedPages[start]
		if !ok {
			return nil
		}
		// A fetch may hold the pages of several windows' reads: this one
		// opens those its rows lie in, so that it neither parses the
		// others' headers nor decodes a dictionary only they need.
		from, to, end := fp.within(g.lo, g.hi)
		first := fp.pages[from].firstRow
		m.firsts[i] = first
		var pages []flatdecode.Page
		index := fp.first
		if _, left := d.fe.leftOut[start]; fp.head.to > fp.head.from && !left {
			b := src.bytesAt(fp.head.from, fp.head.to)
			if b == nil {
				return nil
			}
			pages = append(pages, flatdecode.Page{Offset: fp.head.from, Index: 0, Bytes: b})
		}
		if fp.head.to > fp.head.from {
			index++ // the dictionary page counts, fetched or not
		}
		for k, p := range fp.pages[from:to] {
			b := src.bytesAt(p.offset, p.offset+p.size)
			if b == nil {
				return nil
			}
			page := flatdecode.Page{Offset: p.offset, Index: index + from + k, Bytes: b}
			if p.firstRow < g.lo || fp.pageEnd(from+k) > g.hi {
				// The reads of the rows before or after these, if the
				// same fetch holds them, decode this page too.
				page.Shared = &d.fe.bodies
			}
			pages = append(pages, page)
		}
		col.Values, col.Rows = end-first, end-first
		r, err := flatdecode.OpenPages(pages, col, d.mem)
		if err != nil {
			slog.Debug("parquet: paged column chunk left to arrow-go", "row_group", g.index, "reason", err)
			return nil
		}
		m.fast[i] = r
		out[i].Type = col.Type
	}
	m.schema = arrow.NewSchema(out, fr.Manifest.SchemaMeta)
	m.batch = max(fr.Props.BatchSize, 1)
	fastChunks.Add(int64(len(fields)))
	pagedChunks.Add(int64(len(fields)))
	opened = true
	return m
}

// span returns bytes [from, to) of the file, a column chunk, if one
// prefetched span holds them all (not a chunk fetched in part), or nil.
func (r *chunkReader) span(from, to int64) []byte {
	if r.partial[from] {
		return nil
	}
	return r.bytesAt(from, to)
}

// bytesAt returns bytes [from, to) of the file if one prefetched span
// holds them all, or nil.
func (r *chunkReader) bytesAt(from, to int64) []byte {
	if from < 0 || to < from {
		return nil
	}
	i := sort.Search(len(r.spans), func(i int) bool { return r.spans[i].off > from }) - 1
	if i < 0 {
		return nil
	}
	sp := r.spans[i]
	if to > sp.off+int64(len(sp.data)) {
		return nil
	}
	return sp.data[from-sp.off : to-sp.off : to-sp.off]
}

// next decodes the row group's next n rows.
func (m *mixedColumns) next(n int64) (arrow.RecordBatch, error) {
	arrs := make([]arrow.Array, len(m.fast))
	release := func() { releaseArrays(arrs) }
	if err := m.nextFast(n, arrs, m.workers(n)); err != nil {
		release()
		return nil, err
	}
	for i := range m.fast {
		if m.fast[i] != nil {
			continue
		}
		chunked, err := m.slow[i].NextBatch(n)
		if err != nil {
			release()
			return nil, fmt.Errorf("%w: decode: %w", formats.ErrCorrupt, err)
		}
		arrs[i], err = oneArray(chunked, m.schema.Field(i).Type, m.mem)
		chunked.Release()
		if err != nil {
			release()
			return nil, err
		}
		if got := int64(arrs[i].Len()); got != n {
			release()
			return nil, &shortColumn{name: m.schema.Field(i).Name, got: got}
		}
	}
	rec := array.NewRecordBatch(m.schema, arrs, n)
	release()
	return rec, nil
}

// shortColumn is an arrow-go column that gave fewer rows than a batch
// asked of it.
type shortColumn struct {
	name string
	got  int64
}

func (e *shortColumn) Error() string {
	return fmt.Sprintf("column %q gave %d rows", e.name, e.got)
}

// oneArray makes one array of a chunked one, as arrow-go's record reader
// does.
func oneArray(c *arrow.Chunked, typ arrow.DataType, mem memory.Allocator) (arrow.Array, error) {
	switch chunks := c.Chunks(); len(chunks) {
	case 0:
		return array.MakeArrayOfNull(mem, typ, 0), nil
	case 1:
		chunks[0].Retain()
		return chunks[0], nil
	default:
		return array.Concatenate(chunks, mem)
	}
}

// skip passes over the row group's first n rows: flatdecode's columns
// without decoding what they need not, arrow-go's by reading them.
func (m *mixedColumns) skip(n int64) error {
	for i, f := range m.fast {
		if f != nil {
			if err := f.Skip(n); err != nil {
				return fmt.Errorf("%w: %w", formats.ErrCorrupt, err)
			}
			continue
		}
		for done := int64(0); done < n; {
			chunked, err := m.slow[i].NextBatch(min(m.batch, n-done))
			if err != nil {
				return fmt.Errorf("%w: decode: %w", formats.ErrCorrupt, err)
			}
			got := int64(chunked.Len())
			chunked.Release()
			if got == 0 {
				return fmt.Errorf("%w: columns that disagree on the number of rows: column %q ended after %d rows", formats.ErrCorrupt, m.schema.Field(i).Name, done)
			}
			done += got
		}
	}
	return nil
}

// checkEnd refuses a row group whose arrow-go columns hold more rows than
// the footer's count, as readWhole does (flatdecode's hold exactly
// that many, or Open refused them).
func (m *mixedColumns) checkEnd(rows int64) error {
	for _, c := range m.slow {
		if c == nil {
			continue
		}
		chunked, err := c.NextBatch(1)
		if err != nil {
			return fmt.Errorf("%w: decode: %w", formats.ErrCorrupt, err)
		}
		more := chunked.Len()
		chunked.Release()
		if more > 0 {
			return fmt.Errorf("%w: more rows than the footer's %d", formats.ErrCorrupt, rows)
		}
	}
	return nil
}
