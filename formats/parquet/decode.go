package parquet

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/metadata"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/sluicedata/sluice/formats"
	"github.com/sluicedata/sluice/formats/parquet/internal/flatdecode"
)

// Decode decodes the read's rows from what Fetch fetched (a range that
// holds them): the CPU half of a read. Reads that the prefetched bytes do
// not cover (old files whose chunks arrow-go pads) go to storage.
func (p Format) Decode(ctx context.Context, f *formats.Fragment, fetched formats.Buffer, r *formats.Read) iter.Seq2[arrow.RecordBatch, error] {
	return func(yield func(arrow.RecordBatch, error) bool) {
		start, end := r.Range.Start, r.Range.End
		if start == end {
			return
		}
		fe, _ := fetched.(*parquetFetched)
		if fe == nil {
			b, err := p.Fetch(ctx, f, r)
			if err != nil {
				yield(nil, err)
				return
			}
			fe = b.(*parquetFetched)
			defer fe.Recycle() // this decode's own, and over when it returns
		}
		errStop := errors.New("stopped")
		next := start // the file row of the next batch's first row
		known := &knownUTF8{}
		d := &rowGroupReader{
			ctx:     ctx,
			meta:    f.Meta.(*parquetMeta),
			fe:      fe,
			src:     &chunkReader{Reader: f.Source.ReaderAt(ctx), chunks: fe.chunks, spans: fe.spans, partial: fe.partial, leftOut: fe.leftOut},
			schema:  r.Schema,
			mem:     r.Mem,
			arrowGo: p.ArrowGoDecode,
			known:   known,
			spread:  !p.SerialColumns,
			yield: func(b arrow.RecordBatch) error {
				first := next
				next += b.NumRows()
				b, err := checkBatch(b, first, p.InvalidUTF8, r.Mem, known)
				known.reset()
				if err != nil {
					return err
				}
				if !yield(b, nil) {
					return errStop
				}
				return nil
			},
		}
		decoding.Add(1)
		defer decoding.Add(-1)
		err := d.read(start, end, r.BatchRows)
		if errors.Is(err, errStop) {
			return
		}
		if ioErr := d.src.failure(); err != nil && ioErr != nil {
			err = ioErr // the file could not be fetched, which says nothing of its contents
		}
		if err != nil {
			yield(nil, err)
		}
	}
}

// rowGroupReader is one Decode call reading the row groups its rows lie
// in: what reading each of them needs, which is the same for all.
//
// A row group is read one of four ways (readGroup): with flatdecode
// reading the columns it takes and arrow-go the others (readMixed), or
// arrow-go alone (readWhole); or, where it was fetched page by page, with
// flatdecode alone (readPagedFlat) or arrow-go alone (readPages). Each
// hands its batches, projected to the read's schema, to yield.
type rowGroupReader struct {
	ctx  context.Context
	meta *parquetMeta
	fe   *parquetFetched
	src  *chunkReader
	// fr is arrow-go's reader of the file, over src.
	fr *pqarrow.FileReader
	// schema and mem are the read's: the batches are of that schema.
	schema *arrow.Schema
	mem    memory.Allocator
	// arrowGo rules flatdecode out (Format.ArrowGoDecode).
	arrowGo bool
	// known collects the string columns of each batch found valid UTF-8
	// as they were decoded, which the read's checks then pass over.
	known *knownUTF8
	// spread lets flatdecode's columns of a batch be decoded on idle
	// cores (Format.SerialColumns).
	spread bool
	// yield takes each batch delivered; an error it returns ends the read.
	yield func(arrow.RecordBatch) error
}

// rowGroup is one row group of a read: rows [lo, hi) of its rows rows,
// the first of which is the file's row first.
type rowGroup struct {
	index       int
	first, rows int64
	lo, hi      int64
}

// read delivers the file's rows [start, end), a row group at a time, in
// batches of batchRows.
func (d *rowGroupReader) read(start, end int64, batchRows int) error {
	props := parquet.NewReaderProperties(d.mem)
	// No page can be larger than its column chunk, which Inspect checked.
	props.MaxCompressedPageSize = min(d.meta.maxChunk+chunkPadding, parquet.DefaultMaxCompressedPageSize)
	md := d.fe.md
	if md == nil {
		md = d.meta.readMetadata()
	}
	pf, err := file.NewParquetReader(d.src, file.WithMetadata(md), file.WithReadProps(props))
	if err != nil {
		return fmt.Errorf("%w: %w", formats.ErrCorrupt, err)
	}
	if d.fr, err = pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: int64(batchRows)}, d.mem); err != nil {
		return fmt.Errorf("%w: %w", formats.ErrCorrupt, err)
	}
	for rg := range len(d.meta.starts) - 1 {
		first, last := d.meta.starts[rg], d.meta.starts[rg+1]
		if last <= start || first >= end || first == last || d.fe.pruned[rg] {
			continue
		}
		lo, hi := d.fe.narrowed(rg, max(start, first)-first, min(end, last)-first)
		g := rowGroup{index: rg, first: first, rows: last - first, lo: lo, hi: hi}
		err := guardRowGroup(d.ctx, d.fr, rg, d.fe.leaves, func() error { return d.readGroup(g) })
		if pageErr := d.src.pageFailure(); err != nil && pageErr != nil {
			err = fmt.Errorf("%w: %w", formats.ErrCorrupt, pageErr)
		}
		var short *shortRowGroup
		if errors.As(err, &short) {
			err = short.explain(d.meta.md, rg, d.fe.leaves)
		}
		if err != nil {
			return fmt.Errorf("row group %d: %w", rg, err)
		}
	}
	return nil
}

// readGroup picks how row group g is read: one fetched page by page with
// flatdecode where it takes every column, otherwise with readPages; any
// other with flatdecode reading the chunks it takes (see fast.go); with
// Format.ArrowGoDecode, arrow-go alone.
func (d *rowGroupReader) readGroup(g rowGroup) error {
	paged := d.fe.paged[g.index]
	if paged && !d.arrowGo {
		if m := d.openPaged(g); m != nil {
			defer m.release()
			return d.readPagedFlat(g, m)
		}
	}
	switch {
	case paged:
		return d.readPages(g)
	case d.arrowGo:
		return d.readWhole(g)
	}
	m, err := d.openColumns(g)
	if err != nil {
		return err
	}
	if m == nil {
		return d.readWhole(g)
	}
	defer m.release()
	return d.readMixed(g, m)
}

// readWhole delivers row group g with arrow-go's record reader.
func (d *rowGroupReader) readWhole(g rowGroup) error {
	rr, err := d.fr.GetRecordReader(d.ctx, d.fe.leaves, []int{g.index})
	if err != nil {
		return fmt.Errorf("%w: %w", formats.ErrCorrupt, err)
	}
	defer rr.Release()
	pos, err := positions(rr.Schema(), d.schema)
	if err != nil {
		return err
	}
	toEnd := g.hi == g.rows
	tooMany := fmt.Errorf("%w: more rows than the footer's %d", formats.ErrCorrupt, g.rows)
	skip, want := g.lo, g.hi-g.lo
	for want > 0 && d.ctx.Err() == nil && rr.Next() {
		rec := rr.RecordBatch()
		n := rec.NumRows()
		if skip >= n {
			skip -= n
			continue
		}
		off := skip
		skip = 0
		if toEnd && n-off > want {
			return tooMany
		}
		take := min(n-off, want)
		out, err := d.project(g, rec, pos, off, take, g.hi-want)
		if err != nil {
			return err
		}
		want -= take
		if err := d.yield(out); err != nil {
			return err
		}
	}
	if err := d.ctx.Err(); err != nil {
		return err // arrow-go only notices at its next fetch
	}
	if toEnd && want == 0 && rr.Next() && rr.RecordBatch().NumRows() > 0 {
		return tooMany
	}
	if err := rr.Err(); err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("%w: decode: %w", formats.ErrCorrupt, err)
	} else if err != nil {
		return err
	}
	if want > 0 {
		return &shortRowGroup{decoded: g.hi - want, rows: g.rows}
	}
	return nil
}

// readMixed delivers row group g from readers openColumns opened.
func (d *rowGroupReader) readMixed(g rowGroup, m *mixedColumns) error {
	pos, err := positions(m.schema, d.schema)
	if err != nil {
		return err
	}
	if err := m.skip(g.lo); err != nil {
		return err
	}
	// The batches start where arrow-go's do, at multiples of the batch
	// size, so that the rows are delivered in the same batches.
	size := func(at int64) int64 { return min(m.batch-at%m.batch, g.hi-at) }
	err = d.deliver(g, pos, size, func(at, n int64) (arrow.RecordBatch, error) {
		rec, err := m.next(n)
		if short, ok := err.(*shortColumn); ok {
			// The flatdecode columns hold the row group's rows (Open counted
			// them): arrow-go's ended early.
			return nil, fmt.Errorf("%w: columns that disagree on the number of rows: column %q ended after %d rows, the row group has %d", formats.ErrCorrupt, short.name, at+short.got, g.rows)
		}
		return rec, err
	})
	if err != nil || g.hi != g.rows {
		return err
	}
	return m.checkEnd(g.rows)
}

// readPagedFlat delivers row group g from readers openPaged opened, each
// skipping to lo from its own first row, in the batches readPages makes.
func (d *rowGroupReader) readPagedFlat(g rowGroup, m *mixedColumns) error {
	pos, err := positions(m.schema, d.schema)
	if err != nil {
		return err
	}
	for i := range m.fast {
		if g.lo < m.firsts[i] {
			return fmt.Errorf("%w: column %q: the pages fetched start at row %d, after row %d", formats.ErrCorrupt, m.schema.Field(i).Name, m.firsts[i], g.lo)
		}
	}
	// Up to the first row, each column passes over the rows of its first
	// page before it, a page that the window before most often starts to
	// decompress at the same time: in turns, as the batches' columns.
	// The error is the first column's that failed, whatever the turns.
	errs := make([]error, len(m.fast))
	t := newTurns(m.fast, func(i int) int64 { return g.lo - m.firsts[i] })
	for i, ok := t.next(); ok; i, ok = t.next() {
		errs[i] = m.fast[i].Skip(g.lo - m.firsts[i])
	}
	for _, err := range errs {
		if err != nil {
			return fmt.Errorf("%w: %w", formats.ErrCorrupt, err)
		}
	}
	size := func(at int64) int64 { return min(m.batch, g.hi-at) }
	return d.deliver(g, pos, size, func(_, n int64) (arrow.RecordBatch, error) { return m.next(n) })
}

// readPages delivers row group g, fetched page by page, with arrow-go:
// each column seeks to row lo with the offset index and reads exactly the
// rows asked for, so that no reader goes past the pages that were fetched
// (a record reader would read whole batches).
func (d *rowGroupReader) readPages(g rowGroup) error {
	cols, rs, err := d.fr.GetFieldReaders(d.ctx, d.fe.leaves, []int{g.index})
	if err != nil {
		return fmt.Errorf("%w: %w", formats.ErrCorrupt, err)
	}
	m := &mixedColumns{schema: rs, fast: make([]*flatdecode.Reader, len(cols)), slow: cols, batch: d.fr.Props.BatchSize, mem: d.mem}
	defer m.release()
	pos, err := positions(rs, d.schema)
	if err != nil {
		return err
	}
	for _, c := range cols {
		if g.lo == 0 {
			continue
		}
		if !c.IsOrHasRepeatedChild() {
			if err := c.SeekToRow(g.lo); err != nil {
				return fmt.Errorf("%w: seek to row %d: %w", formats.ErrCorrupt, g.lo, err)
			}
			continue
		}
		// Fetched whole (see expectPages): read up to lo and drop it.
		for skipped := int64(0); skipped < g.lo; {
			chunked, err := c.NextBatch(min(m.batch, g.lo-skipped))
			if err != nil {
				return fmt.Errorf("%w: decode: %w", formats.ErrCorrupt, err)
			}
			n := int64(chunked.Len())
			chunked.Release()
			if n == 0 {
				return fmt.Errorf("%w: column %q ended at row %d of %d", formats.ErrCorrupt, c.Field().Name, skipped, g.rows)
			}
			skipped += n
		}
	}
	size := func(at int64) int64 { return min(m.batch, g.hi-at) }
	return d.deliver(g, pos, size, func(at, n int64) (arrow.RecordBatch, error) {
		rec, err := m.next(n)
		if short, ok := err.(*shortColumn); ok {
			return nil, fmt.Errorf("%w: column %q gave %d rows of %d at row %d (the footer says %d rows)", formats.ErrCorrupt, short.name, short.got, n, at, g.rows)
		}
		return rec, err
	})
}

// deliver hands on rows [g.lo, g.hi) of row group g in batches: size
// gives the rows of the batch that starts at row at, next decodes them,
// and the batch goes to yield projected to the read's schema (pos maps
// its columns onto next's).
func (d *rowGroupReader) deliver(g rowGroup, pos []int, size func(at int64) int64, next func(at, n int64) (arrow.RecordBatch, error)) error {
	for at := g.lo; at < g.hi; {
		if err := d.ctx.Err(); err != nil {
			return err
		}
		n := size(at)
		rec, err := next(at, n)
		if err != nil {
			return err
		}
		out, err := d.project(g, rec, pos, 0, n, at)
		rec.Release()
		if err != nil {
			return err
		}
		at += n
		if err := d.yield(out); err != nil {
			return err
		}
	}
	return nil
}

// project reorders rec's columns to the read's schema, keeps rows [off,
// off+n), converts the columns decoded as another type (see readAs) and
// casts columns whose type was widened when files were unified. at is row
// group g's row of rec's row off.
func (d *rowGroupReader) project(g rowGroup, rec arrow.RecordBatch, pos []int, off, n, at int64) (arrow.RecordBatch, error) {
	cols := make([]arrow.Array, len(pos))
	defer releaseArrays(cols) // NewRecordBatch retains those it takes
	for i, p := range pos {
		col := rec.Column(p)
		if off > 0 || n < int64(col.Len()) {
			col = array.NewSlice(col, off, off+n)
		} else {
			col.Retain()
		}
		want := d.schema.Field(i).Type
		// A column flatdecode read is of its type already (see flatColumn).
		if c, ok := d.meta.convert[d.schema.Field(i).Name]; ok && !arrow.TypeEqual(col.DataType(), c.to) {
			conv, err := c.convert(col, g.first+at, d.mem)
			col.Release()
			if err != nil {
				return nil, fmt.Errorf("%w: column %q %w", formats.ErrCorrupt, d.schema.Field(i).Name, err)
			}
			col = conv
		}
		if re, ok := reinterpret(col, want); ok {
			col.Release()
			col = re
		}
		col, err := formats.Widen(d.ctx, col, d.schema.Field(i), d.mem)
		if err != nil {
			return nil, err
		}
		cols[i] = col
	}
	return array.NewRecordBatch(d.schema, cols, n), nil
}

// releaseArrays releases the arrays of as that are set.
func releaseArrays(as []arrow.Array) {
	for _, a := range as {
		if a != nil {
			a.Release()
		}
	}
}

// positions maps schema's columns onto a decoded schema rs, whose columns
// are in file order.
func positions(rs, schema *arrow.Schema) ([]int, error) {
	pos := make([]int, schema.NumFields())
	for i, fl := range schema.Fields() {
		idx := rs.FieldIndices(fl.Name)
		if len(idx) == 0 {
			return nil, fmt.Errorf("%w: column %q missing from the decoded batch", formats.ErrCorrupt, fl.Name)
		}
		pos[i] = idx[0]
	}
	return pos, nil
}

// shortRowGroup is a row group whose column chunks ended before the row
// count the footer gives it: read says which counts disagree (see
// explain), as only it has the row group's metadata.
type shortRowGroup struct {
	decoded, rows int64
}

func (e *shortRowGroup) Error() string {
	return fmt.Sprintf("%v: the column chunks ended after %d rows; the row group's num_rows is %d", formats.ErrCorrupt, e.decoded, e.rows)
}

func (e *shortRowGroup) Unwrap() error { return formats.ErrCorrupt }

// explain names the counts that disagree. arrow-go reads a column chunk's
// pages until their values reach the chunk's num_values, so a flat column
// whose num_values is below the row group's num_rows ends early by design:
// the message names those columns. Where every such count agrees with
// num_rows, the pages themselves hold fewer values than their chunks'
// num_values say.
func (e *shortRowGroup) explain(md *metadata.FileMetaData, rg int, leaves []int) error {
	g := md.RowGroup(rg)
	var short []string
	for _, leaf := range leaves {
		cc, err := g.ColumnChunk(leaf)
		if err != nil || md.Schema.Column(leaf).MaxRepetitionLevel() > 0 {
			continue // a repeated column's values are not rows
		}
		if n := cc.NumValues(); n < e.rows {
			short = append(short, fmt.Sprintf("column %q's chunk has num_values %d", md.Schema.Column(leaf).Path(), n))
		}
	}
	if len(short) > 0 {
		return fmt.Errorf("%w: the row group's num_rows is %d, but %s (the data ended after %d rows)", formats.ErrCorrupt, e.rows, strings.Join(short, ", "), e.decoded)
	}
	return fmt.Errorf("%w: the column chunks' pages hold %d rows, fewer than their num_values and the row group's num_rows (%d)", formats.ErrCorrupt, e.decoded, e.rows)
}
