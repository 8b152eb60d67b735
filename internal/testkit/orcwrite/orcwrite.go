// Package orcwrite writes small ORC files from Arrow record batches, for
// sluice's tests and benchmarks: columns of booleans, 32- and 64-bit
// integers, floats, doubles, strings, binaries and dates, with nulls, in
// stripes with a row index, compressed with ZLIB, ZSTD or SNAPPY or not at
// all; and structs, lists and maps of them in files without a row index.
// A field's Arrow metadata is written as its type's attributes (as Iceberg
// writes "iceberg.id").
//
// Integers use run-length encoding version 1 and strings the DIRECT
// encoding, which every ORC reader reads; the run-length encoders are
// flushed at each row group, so row index positions never fall inside a
// run.
package orcwrite

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/klauspost/compress/flate"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"google.golang.org/protobuf/encoding/protowire"
)

// Compression is a codec for the file's streams.
type Compression int

// Codecs, numbered as in ORC's PostScript.
const (
	None   Compression = 0
	Zlib   Compression = 1
	Snappy Compression = 2
	Zstd   Compression = 5
)

// Options configure a Writer. Zero values are the defaults.
type Options struct {
	// StripeRows is the rows of a stripe. Default 65536.
	StripeRows int
	// RowIndexStride is the rows of a row group; a multiple of 8, so that
	// booleans' groups start at a byte. Default 10000 rounded down to 8
	// (10000); negative: no row index.
	RowIndexStride int
	// Compression is the codec. Default None.
	Compression Compression
	// BlockSize is the compression block size. Default 256 KiB.
	BlockSize int
}

// Writer writes one ORC file.
type Writer struct {
	w       io.Writer
	schema  *arrow.Schema
	types   [][]byte // the footer's Type messages, in preorder, the root's first
	opts    Options
	at      uint64 // bytes written
	pending []arrow.RecordBatch
	rows    int
	stripes [][]byte // StripeInformation messages
	total   uint64
	mem     memory.Allocator
	zenc    *zstd.Encoder
}

// New starts a file on w with the given schema.
func New(w io.Writer, schema *arrow.Schema, opts Options) (*Writer, error) {
	if opts.StripeRows <= 0 {
		opts.StripeRows = 65536
	}
	if opts.RowIndexStride == 0 {
		opts.RowIndexStride = 10000
	}
	if opts.RowIndexStride > 0 && opts.RowIndexStride%8 != 0 {
		return nil, fmt.Errorf("orcwrite: row index stride %d is not a multiple of 8", opts.RowIndexStride)
	}
	if opts.BlockSize <= 0 {
		opts.BlockSize = 256 << 10
	}
	wr := &Writer{w: w, schema: schema, opts: opts, mem: memory.NewGoAllocator()}
	if err := wr.addType(arrow.Field{Type: arrow.StructOf(schema.Fields()...)}); err != nil {
		return nil, err
	}
	if opts.Compression == Zstd {
		enc, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
		if err != nil {
			return nil, err
		}
		wr.zenc = enc
	}
	if err := wr.write([]byte("ORC")); err != nil {
		return nil, err
	}
	return wr, nil
}

func kindOf(dt arrow.DataType) (uint64, error) {
	switch dt.ID() {
	case arrow.BOOL:
		return 0, nil
	case arrow.INT32:
		return 3, nil
	case arrow.INT64:
		return 4, nil
	case arrow.FLOAT32:
		return 5, nil
	case arrow.FLOAT64:
		return 6, nil
	case arrow.STRING:
		return 7, nil
	case arrow.BINARY:
		return 8, nil
	case arrow.LIST:
		return 10, nil
	case arrow.MAP:
		return 11, nil
	case arrow.STRUCT:
		return 12, nil
	case arrow.DATE32:
		return 15, nil
	}
	return 0, fmt.Errorf("type %s is not one orcwrite writes", dt)
}

// children are the fields below a nested type, in ORC's order.
func children(dt arrow.DataType) []arrow.Field {
	switch t := dt.(type) {
	case *arrow.StructType:
		return t.Fields()
	case *arrow.MapType:
		return []arrow.Field{t.KeyField(), t.ItemField()}
	case *arrow.ListType:
		return []arrow.Field{t.ElemField()}
	}
	return nil
}

// addType appends the Type messages of f and the types below it, in
// preorder (a type's subtypes are numbered after it, each subtree in
// turn).
func (w *Writer) addType(f arrow.Field) error {
	k, err := kindOf(f.Type)
	if err != nil {
		return fmt.Errorf("orcwrite: column %q: %w", f.Name, err)
	}
	kids := children(f.Type)
	if len(w.types) > 0 && len(kids) > 0 && w.opts.RowIndexStride > 0 {
		return fmt.Errorf("orcwrite: column %q: nested columns are written without a row index (RowIndexStride < 0)", f.Name)
	}
	at := len(w.types)
	w.types = append(w.types, nil)
	var sub []uint64
	for _, c := range kids {
		sub = append(sub, uint64(len(w.types)))
		if err := w.addType(c); err != nil {
			return err
		}
	}
	var t []byte
	t = protowire.AppendTag(t, 1, protowire.VarintType)
	t = protowire.AppendVarint(t, k)
	for _, s := range sub {
		t = protowire.AppendTag(t, 2, protowire.VarintType)
		t = protowire.AppendVarint(t, s)
	}
	if _, ok := f.Type.(*arrow.StructType); ok {
		for _, c := range kids {
			t = protowire.AppendTag(t, 3, protowire.BytesType)
			t = protowire.AppendString(t, c.Name)
		}
	}
	for i, key := range f.Metadata.Keys() {
		var pair []byte
		pair = protowire.AppendTag(pair, 1, protowire.BytesType)
		pair = protowire.AppendString(pair, key)
		pair = protowire.AppendTag(pair, 2, protowire.BytesType)
		pair = protowire.AppendString(pair, f.Metadata.Values()[i])
		t = protowire.AppendTag(t, 7, protowire.BytesType)
		t = protowire.AppendBytes(t, pair)
	}
	w.types[at] = t
	return nil
}

func (w *Writer) write(b []byte) error {
	_, err := w.w.Write(b)
	w.at += uint64(len(b))
	return err
}

// Write adds a batch's rows. The writer keeps a reference until the
// stripe that holds them is written.
func (w *Writer) Write(b arrow.RecordBatch) error {
	if !b.Schema().Equal(w.schema) {
		return errors.New("orcwrite: batch schema differs from the file's")
	}
	for off := int64(0); off < b.NumRows(); {
		n := min(b.NumRows()-off, int64(w.opts.StripeRows-w.rows))
		w.pending = append(w.pending, b.NewSlice(off, off+n))
		w.rows += int(n)
		off += n
		if w.rows == w.opts.StripeRows {
			if err := w.flushStripe(); err != nil {
				return err
			}
		}
	}
	return nil
}

// Close writes the last stripe and the file tail. It does not close the
// underlying writer.
func (w *Writer) Close() error {
	if w.rows > 0 {
		if err := w.flushStripe(); err != nil {
			return err
		}
	}
	if w.zenc != nil {
		defer w.zenc.Close()
	}
	contentLength := w.at
	// Footer: types (a root struct and one type per column), stripes,
	// counts.
	var ft []byte
	ft = protowire.AppendTag(ft, 1, protowire.VarintType)
	ft = protowire.AppendVarint(ft, 3)
	ft = protowire.AppendTag(ft, 2, protowire.VarintType)
	ft = protowire.AppendVarint(ft, contentLength)
	for _, s := range w.stripes {
		ft = protowire.AppendTag(ft, 3, protowire.BytesType)
		ft = protowire.AppendBytes(ft, s)
	}
	for _, t := range w.types {
		ft = protowire.AppendTag(ft, 4, protowire.BytesType)
		ft = protowire.AppendBytes(ft, t)
	}
	ft = protowire.AppendTag(ft, 6, protowire.VarintType)
	ft = protowire.AppendVarint(ft, w.total)
	ft = protowire.AppendTag(ft, 8, protowire.VarintType)
	ft = protowire.AppendVarint(ft, uint64(max(w.opts.RowIndexStride, 0)))
	stored, err := w.compress(ft)
	if err != nil {
		return err
	}
	if err := w.write(stored); err != nil {
		return err
	}
	var ps []byte
	ps = protowire.AppendTag(ps, 1, protowire.VarintType)
	ps = protowire.AppendVarint(ps, uint64(len(stored)))
	ps = protowire.AppendTag(ps, 2, protowire.VarintType)
	ps = protowire.AppendVarint(ps, uint64(w.opts.Compression))
	ps = protowire.AppendTag(ps, 3, protowire.VarintType)
	ps = protowire.AppendVarint(ps, uint64(w.opts.BlockSize))
	ps = protowire.AppendTag(ps, 4, protowire.BytesType)
	ps = protowire.AppendBytes(ps, []byte{0, 12})
	ps = protowire.AppendTag(ps, 5, protowire.VarintType)
	ps = protowire.AppendVarint(ps, 0)
	ps = protowire.AppendTag(ps, 8000, protowire.BytesType)
	ps = protowire.AppendString(ps, "ORC")
	if len(ps) > 255 {
		return errors.New("orcwrite: postscript too long")
	}
	return w.write(append(ps, byte(len(ps))))
}

// stream is one column stream being written: run-length or raw bytes,
// then compressed in blocks.
type stream struct {
	kind   uint64
	column int
	w      *Writer
	out    []byte // stored (compressed) bytes
	block  []byte // uncompressed bytes of the block being filled
	err    error
}

func (s *stream) writeBytes(b []byte) {
	for len(b) > 0 {
		n := min(len(b), s.w.opts.BlockSize-len(s.block))
		s.block = append(s.block, b[:n]...)
		b = b[n:]
		if len(s.block) == s.w.opts.BlockSize {
			s.flushBlock()
		}
	}
}

func (s *stream) flushBlock() {
	if len(s.block) == 0 {
		return
	}
	if s.w.opts.Compression == None {
		s.out = append(s.out, s.block...)
	} else {
		c, err := s.w.compressChunk(s.block)
		if err != nil && s.err == nil {
			s.err = err
		}
		s.out = append(s.out, c...)
	}
	s.block = s.block[:0]
}

// position is where the next byte goes: the stored offset of the block
// and the offset in it (uncompressed: just the offset).
func (s *stream) position() []uint64 {
	if s.w.opts.Compression == None {
		return []uint64{uint64(len(s.out) + len(s.block))}
	}
	return []uint64{uint64(len(s.out)), uint64(len(s.block))}
}

func (s *stream) finish() []byte {
	s.flushBlock()
	return s.out
}

// compressChunk compresses one block with its 3-byte header, stored as is
// where compressing does not make it smaller.
func (w *Writer) compressChunk(b []byte) ([]byte, error) {
	var c []byte
	switch w.opts.Compression {
	case Zlib:
		var buf bytes.Buffer
		fw, err := flate.NewWriter(&buf, flate.DefaultCompression)
		if err != nil {
			return nil, err
		}
		fw.Write(b)
		if err := fw.Close(); err != nil {
			return nil, err
		}
		c = buf.Bytes()
	case Snappy:
		c = snappy.Encode(nil, b)
	case Zstd:
		c = w.zenc.EncodeAll(b, nil)
	default:
		return nil, fmt.Errorf("orcwrite: compression %d", w.opts.Compression)
	}
	if len(c) >= len(b) {
		h := len(b)<<1 | 1
		return append([]byte{byte(h), byte(h >> 8), byte(h >> 16)}, b...), nil
	}
	h := len(c) << 1
	return append([]byte{byte(h), byte(h >> 8), byte(h >> 16)}, c...), nil
}

// compress compresses a whole tail message or stripe footer.
func (w *Writer) compress(b []byte) ([]byte, error) {
	if w.opts.Compression == None {
		return b, nil
	}
	var out []byte
	for len(b) > 0 {
		n := min(len(b), w.opts.BlockSize)
		c, err := w.compressChunk(b[:n])
		if err != nil {
			return nil, err
		}
		out = append(out, c...)
		b = b[n:]
	}
	return out, nil
}

// intRLE is ORC's integer run-length encoding, version 1: runs of 3 to
// 130 values with a constant step of -128 to 127, or up to 128 literal
// varints.
type intRLE struct {
	s      *stream
	signed bool
	vals   []int64
	buf    []byte
}

func (e *intRLE) add(v int64) { e.vals = append(e.vals, v) }

func (e *intRLE) varint(v int64) {
	if e.signed {
		e.buf = protowire.AppendVarint(e.buf, protowire.EncodeZigZag(v))
	} else {
		e.buf = protowire.AppendVarint(e.buf, uint64(v))
	}
}

// flush writes the buffered values: runs where three or more values step
// evenly, literals between them.
func (e *intRLE) flush() {
	vals := e.vals
	e.buf = e.buf[:0]
	var lits []int64
	flushLits := func() {
		for len(lits) > 0 {
			n := min(len(lits), 128)
			e.buf = append(e.buf, byte(256-n))
			for _, v := range lits[:n] {
				e.varint(v)
			}
			lits = lits[n:]
		}
	}
	for i := 0; i < len(vals); {
		if i+2 < len(vals) {
			d := vals[i+1] - vals[i]
			if d >= -128 && d <= 127 && vals[i+2]-vals[i+1] == d {
				j := i + 3
				for j < len(vals) && j-i < 130 && vals[j]-vals[j-1] == d {
					j++
				}
				flushLits()
				e.buf = append(e.buf, byte(j-i-3), byte(int8(d)))
				e.varint(vals[i])
				i = j
				continue
			}
		}
		lits = append(lits, vals[i])
		i++
	}
	flushLits()
	e.s.writeBytes(e.buf)
	e.vals = e.vals[:0]
}

// byteRLE is ORC's byte run-length encoding, for booleans' bits.
type byteRLE struct {
	s    *stream
	vals []byte
}

func (e *byteRLE) add(b byte) { e.vals = append(e.vals, b) }

func (e *byteRLE) flush() {
	var out, lits []byte
	flushLits := func() {
		for len(lits) > 0 {
			n := min(len(lits), 128)
			out = append(out, byte(256-n))
			out = append(out, lits[:n]...)
			lits = lits[n:]
		}
	}
	v := e.vals
	for i := 0; i < len(v); {
		j := i + 1
		for j < len(v) && v[j] == v[i] && j-i < 130 {
			j++
		}
		if j-i >= 3 {
			flushLits()
			out = append(out, byte(j-i-3), v[i])
		} else {
			lits = append(lits, v[i:j]...)
		}
		i = j
	}
	flushLits()
	e.s.writeBytes(out)
	e.vals = e.vals[:0]
}

// boolRLE packs bits, most significant first, into a byte RLE.
type boolRLE struct {
	bytes byteRLE
	cur   byte
	n     int
}

func (e *boolRLE) add(v bool) {
	e.cur <<= 1
	if v {
		e.cur |= 1
	}
	e.n++
	if e.n == 8 {
		e.bytes.add(e.cur)
		e.cur, e.n = 0, 0
	}
}

func (e *boolRLE) flush() {
	if e.n > 0 {
		e.bytes.add(e.cur << (8 - e.n))
		e.cur, e.n = 0, 0
	}
	e.bytes.flush()
}

// flushStripe writes the pending rows as one stripe: each column encoded
// into its streams, the row index, the streams, and the stripe footer.
func (w *Writer) flushStripe() error {
	rows := w.rows
	cols, err := w.takePending()
	if err != nil {
		return err
	}
	defer func() {
		for _, a := range cols {
			a.Release()
		}
	}()
	stride := w.opts.RowIndexStride
	if stride < 0 {
		stride = rows
	}
	all := make([]int, rows)
	for i := range all {
		all[i] = i
	}
	outs := make([]columnOut, 0, len(w.types)-1)
	for _, a := range cols {
		outs = w.encodeTree(outs, a, all, stride)
	}
	var st stripeStreams
	// Index streams first (the root's entries hold no positions), then
	// the data streams.
	if w.opts.RowIndexStride > 0 {
		groups := (rows + stride - 1) / stride
		for id := 0; id < len(w.types); id++ {
			stored, err := w.compress(rowIndex(outs, id, groups))
			if err != nil {
				return err
			}
			st.add(&st.index, 6, id, stored)
		}
	}
	for _, o := range outs {
		for _, s := range o.streams {
			b := s.finish()
			if s.err != nil {
				return s.err
			}
			st.add(&st.data, s.kind, s.column, b)
		}
	}
	return w.writeStripe(&st, len(w.types), rows)
}

// encodeTree appends to outs the encoded column of rows idx of a, then the
// columns below it: a struct's fields at its rows that are not null, a
// list's elements and a map's keys and values of its rows that are not.
func (w *Writer) encodeTree(outs []columnOut, a arrow.Array, idx []int, stride int) []columnOut {
	outs = append(outs, w.encodeColumn(a, idx, len(outs)+1, stride))
	switch a := a.(type) {
	case *array.Struct:
		var sub []int
		for _, i := range idx {
			if a.IsValid(i) {
				sub = append(sub, i)
			}
		}
		for f := range a.NumField() {
			outs = w.encodeTree(outs, a.Field(f), sub, len(sub))
		}
	case *array.Map:
		sub := elements(a, idx)
		outs = w.encodeTree(outs, a.Keys(), sub, len(sub))
		outs = w.encodeTree(outs, a.Items(), sub, len(sub))
	case *array.List:
		sub := elements(a, idx)
		outs = w.encodeTree(outs, a.ListValues(), sub, len(sub))
	}
	return outs
}

// elements are the positions in a's values of the elements of its rows
// idx that are not null.
func elements(a array.ListLike, idx []int) []int {
	var sub []int
	for _, i := range idx {
		if a.IsValid(i) {
			start, end := a.ValueOffsets(i)
			for j := start; j < end; j++ {
				sub = append(sub, int(j))
			}
		}
	}
	return sub
}

// takePending concatenates the pending batches into one array a column,
// which the caller releases, and lets the batches go.
func (w *Writer) takePending() ([]arrow.Array, error) {
	cols := make([]arrow.Array, w.schema.NumFields())
	for c := range cols {
		parts := make([]arrow.Array, len(w.pending))
		for i, b := range w.pending {
			parts[i] = b.Column(c)
		}
		a, err := array.Concatenate(parts, w.mem)
		if err != nil {
			for _, done := range cols[:c] {
				done.Release()
			}
			return nil, err
		}
		cols[c] = a
	}
	for _, b := range w.pending {
		b.Release()
	}
	w.pending, w.rows = nil, 0
	return cols, nil
}

// stripeStreams are a stripe's stored streams, index and data, and the
// Stream messages of its footer that describe them, in file order.
type stripeStreams struct {
	index, data [][]byte
	messages    []byte
}

func (st *stripeStreams) add(list *[][]byte, kind uint64, column int, b []byte) {
	*list = append(*list, b)
	var m []byte
	m = protowire.AppendTag(m, 1, protowire.VarintType)
	m = protowire.AppendVarint(m, kind)
	m = protowire.AppendTag(m, 2, protowire.VarintType)
	m = protowire.AppendVarint(m, uint64(column))
	m = protowire.AppendTag(m, 3, protowire.VarintType)
	m = protowire.AppendVarint(m, uint64(len(b)))
	st.messages = protowire.AppendTag(st.messages, 1, protowire.BytesType)
	st.messages = protowire.AppendBytes(st.messages, m)
}

// columnOut is a column encoded: the row index positions of each group,
// and its streams.
type columnOut struct {
	entries [][]uint64
	streams []*stream
}

// columnEncoders are the streams and encoders of one column.
type columnEncoders struct {
	present, data, length *stream
	pres, bools           *boolRLE
	ints                  *intRLE
}

// encodeColumn encodes rows idx of a as column id of a stripe, in row
// groups of stride rows, each group's encoders flushed at its end.
func (w *Writer) encodeColumn(a arrow.Array, idx []int, id, stride int) columnOut {
	var e columnEncoders
	for _, i := range idx {
		if a.IsNull(i) {
			e.present = &stream{kind: 0, column: id, w: w}
			e.pres = &boolRLE{bytes: byteRLE{s: e.present}}
			break
		}
	}
	switch a.DataType().ID() {
	case arrow.STRUCT:
	case arrow.LIST, arrow.MAP:
		e.length = &stream{kind: 2, column: id, w: w}
		e.ints = &intRLE{s: e.length}
	default:
		e.data = &stream{kind: 1, column: id, w: w}
	}
	switch a.DataType().ID() {
	case arrow.INT32, arrow.INT64, arrow.DATE32:
		e.ints = &intRLE{s: e.data, signed: true}
	case arrow.STRING, arrow.BINARY:
		e.length = &stream{kind: 2, column: id, w: w}
		e.ints = &intRLE{s: e.length}
	case arrow.BOOL:
		e.bools = &boolRLE{bytes: byteRLE{s: e.data}}
	}
	stride = max(stride, 1)
	var out columnOut
	for g := 0; g < len(idx); g += stride {
		out.entries = append(out.entries, e.positions(a.DataType().ID()))
		for _, i := range idx[g:min(g+stride, len(idx))] {
			e.add(a, i)
		}
		if e.pres != nil {
			e.pres.bytes.flush()
		}
		if e.ints != nil {
			e.ints.flush()
		}
		if e.bools != nil {
			e.bools.bytes.flush()
		}
	}
	if e.pres != nil {
		e.pres.flush()
	}
	if e.bools != nil {
		e.bools.flush()
	}
	for _, s := range []*stream{e.present, e.data, e.length} {
		if s != nil {
			out.streams = append(out.streams, s)
		}
	}
	return out
}

// positions are the row index positions of a group's start, every encoder
// flushed.
func (e *columnEncoders) positions(typ arrow.Type) []uint64 {
	var pos []uint64
	// A boolean stream's bits run on across groups: a group starts at the
	// byte RLE's next run, some bits into its first byte.
	if e.present != nil {
		pos = append(append(pos, e.present.position()...), 0, uint64(e.pres.n))
	}
	switch typ {
	case arrow.BOOL:
		pos = append(append(pos, e.data.position()...), 0, uint64(e.bools.n))
	case arrow.INT32, arrow.INT64, arrow.DATE32:
		pos = append(append(pos, e.data.position()...), 0)
	case arrow.FLOAT32, arrow.FLOAT64:
		pos = append(pos, e.data.position()...)
	case arrow.STRING, arrow.BINARY:
		pos = append(append(append(pos, e.data.position()...), e.length.position()...), 0)
	}
	return pos
}

// add encodes row i of a.
func (e *columnEncoders) add(a arrow.Array, i int) {
	if e.pres != nil {
		e.pres.add(a.IsValid(i))
	}
	if a.IsNull(i) {
		return
	}
	var scratch [8]byte
	switch a := a.(type) {
	case *array.Int64:
		e.ints.add(a.Value(i))
	case *array.Int32:
		e.ints.add(int64(a.Value(i)))
	case *array.Float64:
		u := math.Float64bits(a.Value(i))
		for k := range 8 {
			scratch[k] = byte(u >> (8 * k))
		}
		e.data.writeBytes(scratch[:8])
	case *array.Float32:
		u := math.Float32bits(a.Value(i))
		for k := range 4 {
			scratch[k] = byte(u >> (8 * k))
		}
		e.data.writeBytes(scratch[:4])
	case *array.String:
		v := a.Value(i)
		e.data.writeBytes([]byte(v))
		e.ints.add(int64(len(v)))
	case *array.Binary:
		v := a.Value(i)
		e.data.writeBytes(v)
		e.ints.add(int64(len(v)))
	case *array.Date32:
		e.ints.add(int64(a.Value(i)))
	case *array.Boolean:
		e.bools.add(a.Value(i))
	case array.ListLike: // lists and maps
		start, end := a.ValueOffsets(i)
		e.ints.add(end - start)
	}
}

// rowIndex is the RowIndex message of column id (0, the root, has entries
// without positions).
func rowIndex(outs []columnOut, id, groups int) []byte {
	var ix []byte
	for g := range groups {
		var entry []byte
		if id > 0 {
			var packed []byte
			for _, p := range outs[id-1].entries[g] {
				packed = protowire.AppendVarint(packed, p)
			}
			entry = protowire.AppendTag(entry, 1, protowire.BytesType)
			entry = protowire.AppendBytes(entry, packed)
		}
		ix = protowire.AppendTag(ix, 1, protowire.BytesType)
		ix = protowire.AppendBytes(ix, entry)
	}
	return ix
}

// writeStripe writes a stripe's streams and its footer, and notes the
// stripe for the file footer.
func (w *Writer) writeStripe(st *stripeStreams, types, rows int) error {
	sf := st.messages
	for range types {
		var e []byte
		e = protowire.AppendTag(e, 1, protowire.VarintType)
		e = protowire.AppendVarint(e, 0) // DIRECT
		sf = protowire.AppendTag(sf, 2, protowire.BytesType)
		sf = protowire.AppendBytes(sf, e)
	}
	sfStored, err := w.compress(sf)
	if err != nil {
		return err
	}
	offset := w.at
	var indexLen, dataLen uint64
	for _, b := range st.index {
		indexLen += uint64(len(b))
		if err := w.write(b); err != nil {
			return err
		}
	}
	for _, b := range st.data {
		dataLen += uint64(len(b))
		if err := w.write(b); err != nil {
			return err
		}
	}
	if err := w.write(sfStored); err != nil {
		return err
	}
	var si []byte
	for i, v := range []uint64{offset, indexLen, dataLen, uint64(len(sfStored)), uint64(rows)} {
		si = protowire.AppendTag(si, protowire.Number(i+1), protowire.VarintType)
		si = protowire.AppendVarint(si, v)
	}
	w.stripes = append(w.stripes, si)
	w.total += uint64(rows)
	return nil
}
