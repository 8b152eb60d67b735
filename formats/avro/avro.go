// Package avro is the formats driver for Apache Avro object container
// files (.avro), in pure Go: the container's header and blocks, the
// codecs null, deflate, snappy, zstandard and bzip2, and Avro's binary
// encoding decoded straight into Arrow builders.
//
// Blocks are what a file is cut into: each block's header gives its
// object count and byte size, so planning walks them and knows every
// row count exactly. A unit is a run of blocks of about Format.UnitBytes;
// a read fetches only the blocks that hold its rows (Unit.Paged), so a
// unit that a split boundary cuts is fetched about once.
//
// The walk costs planning requests, since a block is found only from the
// one before it: blocks under 1 MiB are read through, in windows of
// 4 MiB (a file of small blocks is read whole at planning), and after a
// block of 1 MiB or more only its sync marker and the next header are
// fetched, in one 64-byte request. The block index goes into the plan
// cache (PlanOptions.Cache), so a restarted job does not walk again.
package avro

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"iter"
	"path"
	"sort"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/sluicedata/sluice/formats"
	"github.com/sluicedata/sluice/internal/unzeroed"
)

// Format reads Avro object container files: the formats driver for .avro
// files. The zero value is ready to use.
type Format struct {
	// UnitBytes is the stored size a unit's blocks add up to before the
	// next block starts a new unit: what splits deal out and readers
	// fetch at once. Default 8 MiB. A block larger than this is a unit
	// of its own.
	UnitBytes int64
	// MaxBlockBytes bounds a block's objects once decompressed: a block
	// that claims more is refused as corrupt, so that a damaged or
	// hostile file cannot make a read allocate without bound. Default
	// 256 MiB.
	MaxBlockBytes int64
}

// Name returns "avro".
func (Format) Name() string { return "avro" }

// Match accepts .avro files.
func (Format) Match(key string) bool { return strings.EqualFold(path.Ext(key), ".avro") }

func (o Format) unitBytes() int64 {
	if o.UnitBytes > 0 {
		return o.UnitBytes
	}
	return 8 << 20
}

func (o Format) maxBlockBytes() int64 {
	if o.MaxBlockBytes > 0 {
		return o.MaxBlockBytes
	}
	return 256 << 20
}

// meta is what Inspect keeps for reads.
type meta struct {
	h    *header
	root *node
	cols []field
	// byName maps a column name to its index in cols.
	byName map[string]int
	blocks []block
	// starts[i] is the first row of block i; starts[len] is the total.
	starts []int64
	// units[u] is the first block of unit u; units[len] is len(blocks).
	units []int
}

// headGuess is how much of a file's start Inspect reads first: the
// header of most files, and the first blocks of small ones.
const headGuess = 64 << 10

// Inspect reads the header, walks the blocks and groups them into units.
// A unit's Bytes are its blocks' whatever the columns: Avro stores rows,
// and a read fetches whole blocks.
func (o Format) Inspect(ctx context.Context, f *formats.Fragment, columns []string) error {
	m, err := o.load(ctx, f)
	if err != nil {
		return err
	}
	fields := make([]arrow.Field, len(m.cols))
	for i, c := range m.cols {
		fields[i] = withID(arrow.Field{Name: c.name, Type: c.typ.arrow, Nullable: c.typ.nullable}, c.id)
	}
	var units []formats.Unit
	m.units = []int{0}
	for i := 0; i < len(m.blocks); {
		u := formats.Unit{Offset: m.blocks[i].off}
		j := i
		for ; j < len(m.blocks) && (j == i || m.blocks[j].end()-u.Offset <= o.unitBytes()); j++ {
			u.Rows += m.blocks[j].rows
		}
		u.Bytes = m.blocks[j-1].end() - u.Offset
		u.Paged = j-i > 1
		units = append(units, u)
		m.units = append(m.units, j)
		i = j
	}
	f.Units, f.Rows, f.Schema, f.Meta = units, m.starts[len(m.blocks)], arrow.NewSchema(fields, nil), m
	return nil
}

// load reads the header and the block index, from the plan cache where
// it has them.
func (o Format) load(ctx context.Context, f *formats.Fragment) (*meta, error) {
	var key []byte
	if c := f.Cache(); c != nil {
		key = f.CacheKey("avro-blocks")
		if v, err := c.Get(ctx, key); err == nil && len(v) > 0 {
			if m, err := o.fromCache(v, f.Size); err == nil {
				return m, nil
			}
			// A damaged entry is a miss: walk again.
		}
	}
	r := f.Source.ReaderAt(ctx)
	w := &window{r: r, size: f.Size}
	head, err := w.get(0, int(min(f.Size, headGuess)), headGuess)
	if err != nil {
		return nil, err
	}
	h, err := parseHeader(head)
	for errors.Is(err, errShort) && int64(len(head)) < f.Size {
		n := min(f.Size, int64(len(head))*4)
		if head, err = w.get(0, int(n), int(n)); err != nil {
			return nil, err
		}
		h, err = parseHeader(head)
	}
	if err != nil {
		if errors.Is(err, errShort) {
			err = fmt.Errorf("the file ends at byte %d inside its header: truncated, or not Avro", f.Size)
		}
		return nil, fmt.Errorf("%w: %w", formats.ErrCorrupt, err)
	}
	m, err := o.newMeta(h)
	if err != nil {
		return nil, err
	}
	if m.blocks, err = walk(ctx, w, h.size, h.sync, minSize(m.root), o.limit(h.codec)); err != nil {
		var re *readError
		if ctx.Err() != nil || errors.As(err, &re) {
			return nil, err
		}
		return nil, fmt.Errorf("%w: %w", formats.ErrCorrupt, err)
	}
	m.count()
	if key != nil {
		_ = f.Cache().Set(ctx, key, m.encode()) // a failed write costs the next plan a walk
	}
	return m, nil
}

// limit is the most bytes a block's objects may take, given its stored
// size.
func (o Format) limit(codec string) func(int64) int64 {
	if codec == "" || codec == "null" {
		return func(stored int64) int64 { return stored }
	}
	return func(int64) int64 { return o.maxBlockBytes() }
}

func (o Format) newMeta(h *header) (*meta, error) {
	root, err := parseSchema(h.schema)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", formats.ErrCorrupt, err)
	}
	m := &meta{h: h, root: root, cols: columns(root), byName: map[string]int{}}
	for i, c := range m.cols {
		m.byName[c.name] = i
	}
	return m, nil
}

func (m *meta) count() {
	m.starts = make([]int64, len(m.blocks)+1)
	for i, b := range m.blocks {
		m.starts[i+1] = m.starts[i] + b.rows
	}
}

// encode is the cache entry of m: the header's bytes, then each block's
// object count, header length and stored size.
func (m *meta) encode() []byte {
	out := binary.AppendUvarint(nil, uint64(len(m.h.raw)))
	out = append(out, m.h.raw...)
	out = binary.AppendUvarint(out, uint64(len(m.blocks)))
	for _, b := range m.blocks {
		out = binary.AppendUvarint(out, uint64(b.rows))
		out = binary.AppendUvarint(out, uint64(b.data-b.off))
		out = binary.AppendUvarint(out, uint64(b.size))
	}
	return out
}

// fromCache rebuilds what load finds from a cache entry, checking that
// its blocks tile the file.
func (o Format) fromCache(v []byte, size int64) (*meta, error) {
	bad := errors.New("bad cache entry")
	next := func() uint64 {
		x, n := binary.Uvarint(v)
		if n <= 0 {
			v = nil
			return 0
		}
		v = v[n:]
		return x
	}
	hs := next()
	if hs == 0 || hs > uint64(len(v)) {
		return nil, bad
	}
	h, err := parseHeader(v[:hs])
	if err != nil || uint64(h.size) != hs {
		return nil, bad
	}
	v = v[hs:]
	m, err := o.newMeta(h)
	if err != nil {
		return nil, err
	}
	nb := next()
	if nb > uint64(len(v)) {
		return nil, bad
	}
	off := h.size
	for range nb {
		rows, hl, sz := next(), next(), next()
		if v == nil || rows > 1<<40 || hl > 20 || sz > uint64(size) {
			return nil, bad
		}
		b := block{off: off, data: off + int64(hl), size: int64(sz), rows: int64(rows)}
		if b.end() > size {
			return nil, bad
		}
		m.blocks = append(m.blocks, b)
		off = b.end()
	}
	if off != size || len(v) != 0 {
		return nil, bad
	}
	m.count()
	return m, nil
}

// blockRange is the blocks [first, end) that hold r's rows: found by the
// rows where r has them, else r's units whole.
func (m *meta) blockRange(r formats.Range) (int, int) {
	if !r.Known() {
		return m.units[r.FirstUnit], m.units[r.EndUnit]
	}
	n := len(m.blocks)
	first := sort.Search(n, func(b int) bool { return m.starts[b+1] > r.Start })
	end := sort.Search(n, func(b int) bool { return m.starts[b] >= r.End })
	return first, max(first, end)
}

// fetched is what Fetch hands to Decode: the file's bytes [off, off+len).
type fetched struct {
	off  int64
	data []byte
}

// Size is the memory the fetched blocks hold.
func (fe *fetched) Size() int64 { return int64(len(fe.data)) }

// Fetch fetches the blocks that hold the read's rows, in one request.
func (o Format) Fetch(ctx context.Context, f *formats.Fragment, r *formats.Read) (formats.Buffer, error) {
	m := f.Meta.(*meta)
	first, end := m.blockRange(r.Range)
	if first >= end {
		return &fetched{}, nil
	}
	from, to := m.blocks[first].off, m.blocks[end-1].end()
	// The read fills the buffer or fails: it needs no zeroing first.
	fe := &fetched{off: from, data: unzeroed.Bytes(int(to - from))}
	if n, err := f.Source.ReaderAt(ctx).ReadAt(fe.data, from); err != nil && !(errors.Is(err, io.EOF) && n == len(fe.data)) {
		return nil, err
	}
	return fe, nil
}

// Decode delivers the read's rows from the fetched blocks.
func (o Format) Decode(ctx context.Context, f *formats.Fragment, buf formats.Buffer, r *formats.Read) iter.Seq2[arrow.RecordBatch, error] {
	return func(yield func(arrow.RecordBatch, error) bool) {
		m := f.Meta.(*meta)
		first, end := m.blockRange(r.Range)
		if first >= end {
			return
		}
		fe, _ := buf.(*fetched)
		if fe == nil {
			b, err := o.Fetch(ctx, f, r)
			if err != nil {
				yield(nil, err)
				return
			}
			fe = b.(*fetched)
		}
		d, err := m.newReader(r)
		if err != nil {
			yield(nil, err)
			return
		}
		defer d.release()
		for i := first; i < end; i++ {
			lo, hi := int64(0), m.blocks[i].rows
			if r.Range.Known() {
				lo, hi = max(r.Range.Start-m.starts[i], 0), min(r.Range.End-m.starts[i], hi)
			}
			d.left += max(hi-lo, 0)
		}
		d.reserve()
		stopped := errors.New("stopped")
		emit := func(b arrow.RecordBatch) error {
			if !yield(b, nil) {
				return stopped
			}
			return nil
		}
		for i := first; i < end; i++ {
			if err := ctx.Err(); err != nil {
				yield(nil, err)
				return
			}
			lo, hi := int64(0), m.blocks[i].rows
			if r.Range.Known() {
				lo, hi = max(r.Range.Start-m.starts[i], 0), min(r.Range.End-m.starts[i], hi)
			}
			if err := o.decodeBlock(ctx, m, i, fe, d, lo, hi, emit); err != nil {
				if !errors.Is(err, stopped) {
					yield(nil, err)
				}
				return
			}
		}
		if err := d.flush(ctx, emit); err != nil && !errors.Is(err, stopped) {
			yield(nil, err)
		}
	}
}

// decodeBlock decodes objects [lo, hi) of block i into d, emitting each
// full batch.
func (o Format) decodeBlock(ctx context.Context, m *meta, i int, fe *fetched, d *reader, lo, hi int64, emit func(arrow.RecordBatch) error) error {
	b := m.blocks[i]
	where := fmt.Sprintf("block %d (bytes %d to %d)", i, b.off, b.end())
	if b.off < fe.off || b.end() > fe.off+int64(len(fe.data)) {
		return fmt.Errorf("%s: not fetched", where)
	}
	raw := fe.data[b.off-fe.off : b.end()-fe.off]
	hdr := &cursor{b: raw}
	rows, size := hdr.long(), hdr.long()
	if hdr.err != nil || rows != b.rows || size != b.size || int64(hdr.p) != b.data-b.off {
		return fmt.Errorf("%w: %s: the block header is not the one planning read: the file changed", formats.ErrCorrupt, where)
	}
	if string(raw[len(raw)-syncSize:]) != string(m.h.sync[:]) {
		return fmt.Errorf("%w: %s: the sync marker after the block is not the header's", formats.ErrCorrupt, where)
	}
	data, err := decompress(m.h.codec, raw[hdr.p:len(raw)-syncSize], o.maxBlockBytes(), d.scratch)
	if err != nil {
		return fmt.Errorf("%w: %s: %w", formats.ErrCorrupt, where, err)
	}
	if m.h.codec != "" && m.h.codec != "null" {
		d.scratch = data // the builders copy what they keep: the next block reuses it
	}
	c := &cursor{b: data}
	for row := int64(0); row < hi; row++ {
		if row < lo {
			d.skip(c)
		} else {
			d.decode(c)
		}
		if c.err != nil {
			return fmt.Errorf("%w: %s: object %d of %d%s: %w", formats.ErrCorrupt, where, row, b.rows, d.at, c.err)
		}
		if row >= lo && d.rows >= d.batchRows {
			if err := d.flush(ctx, emit); err != nil {
				return err
			}
		}
	}
	if hi == b.rows && c.p != len(data) {
		return fmt.Errorf("%w: %s: %d bytes left after its %d objects: a lying object count", formats.ErrCorrupt, where, len(data)-c.p, b.rows)
	}
	return nil
}

// reader decodes objects into builders of the read's columns and cuts
// them into batches.
type reader struct {
	schema *arrow.Schema
	mem    memory.Allocator
	// ops decode or skip each column of the file, in file order; skips
	// skip every one.
	ops, skips []dec
	names      []string
	// builders or directs (one of the two at each index) collect the
	// read's columns.
	builders  []array.Builder
	directs   []*direct
	rows      int
	batchRows int
	// left is the rows still to decode; dataBytes the bytes of each
	// string or binary builder's values in the batch before, so that a
	// batch's buffers are sized once, not grown by doubling (a tenth of
	// a read's CPU went to growing them).
	left      int64
	dataBytes []int
	// scratch is the last block's decompressed bytes, for the next.
	scratch []byte
	// at names the column being read when an error struck.
	at string
}

// reserve sizes the builders for the next batch.
func (d *reader) reserve() {
	n := int(max(min(int64(d.batchRows), d.left), 0))
	for i, b := range d.builders {
		// The batch before's bytes a row, and an eighth more: lengths
		// vary, and a buffer one byte short is copied whole to grow.
		data := d.dataBytes[i] * n / d.batchRows
		data += data / 8
		if dc := d.directs[i]; dc != nil {
			dc.start(n, data)
			continue
		}
		if n == 0 {
			continue
		}
		b.Reserve(n)
		if bb, ok := b.(*array.BinaryBuilder); ok && data > 0 {
			bb.ReserveData(data)
		}
		if sb, ok := b.(*array.StringBuilder); ok && data > 0 {
			sb.ReserveData(data)
		}
	}
}

func (m *meta) newReader(r *formats.Read) (*reader, error) {
	d := &reader{schema: r.Schema, mem: r.Mem, batchRows: r.BatchRows, ops: make([]dec, len(m.cols)), skips: make([]dec, len(m.cols))}
	if d.batchRows <= 0 {
		d.batchRows = 8192
	}
	for i, c := range m.cols {
		d.skips[i] = skipper(c.typ)
		d.ops[i] = d.skips[i]
		d.names = append(d.names, c.name)
	}
	for _, fl := range r.Schema.Fields() {
		i, ok := m.byName[fl.Name]
		if !ok {
			d.release()
			return nil, fmt.Errorf("%w: column %q is not in the file", formats.ErrSchema, fl.Name)
		}
		d.dataBytes = append(d.dataBytes, 0)
		if dc := directOf(m.cols[i].typ); dc != nil && unzeroed.RuntimeMemory(r.Mem) {
			d.builders, d.directs = append(d.builders, nil), append(d.directs, dc)
			d.ops[i] = dc.decode
			continue
		}
		b := array.NewBuilder(r.Mem, m.cols[i].typ.arrow)
		d.builders, d.directs = append(d.builders, b), append(d.directs, nil)
		d.ops[i] = decoder(m.cols[i].typ, b)
	}
	return d, nil
}

func (d *reader) release() {
	for _, b := range d.builders {
		if b != nil {
			b.Release()
		}
	}
	d.builders = nil
}

// decode decodes one object into the builders.
func (d *reader) decode(c *cursor) {
	d.run(c, d.ops)
	d.rows++
}

// skip reads past one object.
func (d *reader) skip(c *cursor) { d.run(c, d.skips) }

func (d *reader) run(c *cursor, ops []dec) {
	for i, op := range ops {
		op(c)
		if c.err != nil {
			d.at = fmt.Sprintf(", column %q", d.names[i])
			return
		}
	}
}

// flush emits the rows decoded so far as a batch, its columns widened to
// the read's types where planning unified files to wider ones.
func (d *reader) flush(ctx context.Context, emit func(arrow.RecordBatch) error) error {
	if d.rows == 0 {
		return nil
	}
	arrs := make([]arrow.Array, len(d.builders))
	defer func() {
		for _, a := range arrs {
			if a != nil {
				a.Release()
			}
		}
	}()
	for i, b := range d.builders {
		var col arrow.Array
		switch bb := b.(type) {
		case nil:
			dc := d.directs[i]
			d.dataBytes[i] = len(dc.data) * d.batchRows / d.rows
			data := dc.array()
			col = array.MakeFromData(data)
			data.Release()
		case *array.BinaryBuilder:
			d.dataBytes[i] = bb.DataLen() * d.batchRows / d.rows
		case *array.StringBuilder:
			d.dataBytes[i] = bb.DataLen() * d.batchRows / d.rows
		}
		if col == nil {
			col = b.NewArray()
		}
		a, err := formats.Widen(ctx, col, d.schema.Field(i), d.mem)
		if err != nil {
			return err
		}
		arrs[i] = a
	}
	rec := array.NewRecordBatch(d.schema, arrs, int64(d.rows))
	d.left -= int64(d.rows)
	d.rows = 0
	d.reserve()
	return emit(rec)
}
