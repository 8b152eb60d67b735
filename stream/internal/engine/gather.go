package engine

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/sluicedata/sluice/internal/unzeroed"
)

// A shuffled batch is gathered straight from its windows' decoded record
// batches into one batch: no concatenation of a window first, none of the
// parts of a batch that spans two windows after, and for fixed-width and
// string/binary columns no compute kernel, whose per-call set-up and
// zero-then-copy string path cost twice the copy itself. Fixed-width values
// of 4 and 8 bytes move as machine words (a copy call per value costs more
// than the value); where rows come in runs of consecutive rows (clumps),
// each run moves as one copy, and a run of strings as one copy of its bytes
// after one pass over its offsets. Other types (lists, structs,
// dictionaries) fall back to arrow's Take over each window concatenated.

// source is where one output row comes from: a record batch of the gather's
// parts, and a row of it.
type source struct {
	rec int32
	row int32
}

// span is a run of n consecutive rows of one record batch, from row on.
type span struct {
	rec, row, n int32
}

// gatherPart is the rows idx (window row numbers) of window w.
type gatherPart struct {
	w   *window
	idx []int32
}

// gatherPlan is where every output row of a gather comes from.
type gatherPlan struct {
	recs []arrow.RecordBatch // every part's record batches, in part order
	n    int                 // output rows
	src  []source            // per output row; see sources
	// srcOnce makes sources safe for a gather's columns on several
	// goroutines.
	srcOnce sync.Once
	parts   []gatherPart
	spans   []span // src as runs; nil where runs are too short to pay
	// inv, where the gather is a permutation of all the rows of its record
	// batches, is the output row of each of their rows (in record batch
	// order): the gather can then read its sources in order and write at
	// random, which a core does faster than the reverse.
	inv []int32
	// used, where known, is the rows [lo, hi) of each record batch the
	// gather takes, all of them (a mix's runs): variable-width values
	// then need no pass to size their bytes.
	used [][2]int32
}

// minRun is the mean run length from which gathering by runs beats
// gathering row by row.
const minRun = 4

func newGatherPlan(parts []gatherPart) *gatherPlan {
	g := &gatherPlan{parts: parts}
	for _, p := range parts {
		g.n += len(p.idx)
		g.recs = append(g.recs, p.w.recs...)
	}
	g.sources()
	if len(parts) == 1 && int64(g.n) == recsRows(g.recs) {
		g.inv = inverse(g.src, g.recs)
	}
	g.findRuns()
	return g
}

// newSourcePlan is the plan of rows whose sources are already known (a
// mix's, put together from its sources' runs); used, if not nil, is the
// rows of each record batch that src takes (see gatherPlan), and runs the
// runs of consecutive rows of one record batch in src, counted as src was
// made.
func newSourcePlan(recs []arrow.RecordBatch, src []source, used [][2]int32, runs int) *gatherPlan {
	g := &gatherPlan{recs: recs, n: len(src), src: src, used: used}
	g.spansOf(runs)
	return g
}

// findRuns sets spans where the rows come in runs long enough to pay.
func (g *gatherPlan) findRuns() {
	runs := 0
	for i, s := range g.src {
		if i == 0 || s.rec != g.src[i-1].rec || s.row != g.src[i-1].row+1 {
			runs++
		}
	}
	g.spansOf(runs)
}

// spansOf sets spans, given that src holds runs runs, if they are long
// enough to pay.
func (g *gatherPlan) spansOf(runs int) {
	if runs*minRun <= len(g.src) {
		g.spans = make([]span, 0, runs)
		for i, s := range g.src {
			if k := len(g.spans) - 1; i > 0 && s.rec == g.src[i-1].rec && s.row == g.src[i-1].row+1 {
				g.spans[k].n++
				continue
			}
			g.spans = append(g.spans, span{s.rec, s.row, 1})
		}
	}
}

// newPermutePlan is the plan of all of w's rows in order, a permutation of
// them: its gathers write each source row, in order, to its place, and need
// no sources but for nulls and the types without a word-sized path.
func newPermutePlan(w *window, order []int32) *gatherPlan {
	g := &gatherPlan{recs: w.recs, n: len(order), parts: []gatherPart{{w, order}}}
	g.inv = make([]int32, len(order))
	for i, r := range order {
		g.inv[r] = int32(i)
	}
	return g
}

// newConcatPlan is the plan of all the rows of recs, one batch after
// another: each batch one run.
func newConcatPlan(recs []arrow.RecordBatch) *gatherPlan {
	g := &gatherPlan{recs: recs, spans: make([]span, 0, len(recs)), used: make([][2]int32, 0, len(recs))}
	for k, r := range recs {
		n := int32(r.NumRows())
		g.spans = append(g.spans, span{int32(k), 0, n})
		g.used = append(g.used, [2]int32{0, n})
		g.n += int(n)
	}
	return g
}

// sources returns where each output row comes from, computing it once.
func (g *gatherPlan) sources() []source {
	g.srcOnce.Do(func() {
		if g.src != nil {
			return
		}
		if g.parts == nil {
			// A concatenation: its runs are all there is.
			g.src = make([]source, 0, g.n)
			for _, s := range g.spans {
				for r := range s.n {
					g.src = append(g.src, source{s.rec, s.row + r})
				}
			}
			return
		}
		g.src = make([]source, 0, g.n)
		base := int32(0)
		for _, p := range g.parts {
			g.src = locate(g.src, p.w.starts, p.idx, base)
			base += int32(len(p.w.recs))
		}
	})
	return g.src
}

func recsRows(recs []arrow.RecordBatch) int64 {
	var n int64
	for _, r := range recs {
		n += r.NumRows()
	}
	return n
}

// inverse returns, for the rows of recs in order, their output rows under
// src, or nil if src is not a permutation of them.
func inverse(src []source, recs []arrow.RecordBatch) []int32 {
	first := make([]int, len(recs))
	n := 0
	for k, r := range recs {
		first[k] = n
		n += int(r.NumRows())
	}
	inv := make([]int32, n)
	for i := range inv {
		inv[i] = -1
	}
	for i, s := range src {
		at := first[s.rec] + int(s.row)
		if inv[at] >= 0 {
			return nil // a row taken twice
		}
		inv[at] = int32(i)
	}
	return inv
}

// locate appends the (record batch, row) of window rows idx, the window's
// record batches starting at starts and numbered from base.
func locate(out []source, starts []int64, idx []int32, base int32) []source {
	if len(starts) == 1 {
		for _, r := range idx {
			out = append(out, source{base, r})
		}
		return out
	}
	k := 0
	for _, r := range idx {
		r64 := int64(r)
		// Clumps and nearby rows mostly stay in the record batch of the
		// row before.
		if r64 < starts[k] || (k+1 < len(starts) && r64 >= starts[k+1]) {
			lo, hi := 0, len(starts) // the last start <= r
			for hi-lo > 1 {
				m := int(uint(lo+hi) >> 1)
				if starts[m] <= r64 {
					lo = m
				} else {
					hi = m
				}
			}
			k = lo
		}
		out = append(out, source{base + int32(k), int32(r64 - starts[k])})
	}
	return out
}

// gatherWindow builds the batch of w's rows at idx (window row numbers).
func gatherWindow(ctx context.Context, schema *arrow.Schema, w *window, idx []int32, mem memory.Allocator) (arrow.RecordBatch, error) {
	return gather(ctx, schema, []gatherPart{{w, idx}}, mem)
}

// gather builds one batch of the rows of parts, in order.
func gather(ctx context.Context, schema *arrow.Schema, parts []gatherPart, mem memory.Allocator) (arrow.RecordBatch, error) {
	return gatherBy(ctx, schema, newGatherPlan(parts), mem)
}

// gatherBy builds the batch of plan g.
func gatherBy(ctx context.Context, schema *arrow.Schema, g *gatherPlan, mem memory.Allocator) (arrow.RecordBatch, error) {
	return gatherOn(ctx, schema, g, mem, 1)
}

// gatherOn builds the batch of plan g, its columns gathered on up to
// workers goroutines (the calling one included), all joined before it
// returns. mem must be safe for concurrent use where workers > 1.
//
// Where every column has a path of its own (gathersFast), each of which
// writes every byte of what it allocates, and mem is Go's own allocator or
// offers unzeroed buffers, the buffers come unzeroed (unzeroed.Of) for a
// gather that writes them in order. Not for a permutation's scatter (g.inv): the runtime zeroes a
// buffer in one sequential sweep that leaves it in the core's cache, where
// the scatter's writes at random then land; into an unzeroed buffer each
// of them fetches its line from memory first, and a shuffled read of the
// table data on 2 cores ran 3-6% slower so.
func gatherOn(ctx context.Context, schema *arrow.Schema, g *gatherPlan, mem memory.Allocator, workers int) (arrow.RecordBatch, error) {
	if g.inv == nil && gathersFast(schema) {
		mem, _ = unzeroed.Of(mem)
	}
	cols := make([]arrow.Array, schema.NumFields())
	errs := make([]error, len(cols))
	if workers = min(workers, len(cols)); workers > 1 {
		var next atomic.Int64
		work := func() {
			for {
				c := int(next.Add(1) - 1)
				if c >= len(cols) {
					return
				}
				cols[c], errs[c] = gatherColumnGuarded(ctx, schema, g, mem, c)
			}
		}
		var wg sync.WaitGroup
		for range workers - 1 {
			wg.Go(work)
		}
		work()
		wg.Wait()
	} else {
		for c := range cols {
			if cols[c], errs[c] = gatherColumn(ctx, schema, g, mem, c); errs[c] != nil {
				break
			}
		}
	}
	for _, err := range errs {
		if err != nil {
			for _, c := range cols {
				if c != nil {
					c.Release()
				}
			}
			return nil, err
		}
	}
	rec := array.NewRecordBatch(schema, cols, int64(g.n))
	for _, c := range cols {
		c.Release()
	}
	return rec, nil
}

// gatherColumnGuarded is gatherColumn on a goroutine of gatherOn's, where
// no stage is there to recover a panic: it becomes the column's error.
func gatherColumnGuarded(ctx context.Context, schema *arrow.Schema, g *gatherPlan, mem memory.Allocator, c int) (a arrow.Array, err error) {
	defer func() {
		if p := recover(); p != nil {
			a, err = nil, fmt.Errorf("gather column %q panicked: %v", schema.Field(c).Name, p)
		}
	}()
	return gatherColumn(ctx, schema, g, mem, c)
}

// gatherColumn gathers column c of plan g.
func gatherColumn(ctx context.Context, schema *arrow.Schema, g *gatherPlan, mem memory.Allocator, c int) (arrow.Array, error) {
	in := make([]arrow.ArrayData, len(g.recs))
	for k, r := range g.recs {
		in[k] = r.Column(c).Data()
	}
	dt := schema.Field(c).Type
	var d arrow.ArrayData
	switch {
	case dt.ID() == arrow.BOOL:
		d = gatherBool(dt, in, g, mem)
	case dt.ID() == arrow.STRING || dt.ID() == arrow.BINARY:
		d = gatherVar[int32](dt, in, g, mem, arrow.Int32Traits.CastFromBytes)
	case dt.ID() == arrow.LARGE_STRING || dt.ID() == arrow.LARGE_BINARY:
		d = gatherVar[int64](dt, in, g, mem, arrow.Int64Traits.CastFromBytes)
	case fixedWidth(dt):
		d = gatherFixed(dt, in, g, mem)
	default:
		a, err := takeParts(ctx, c, g.parts, mem)
		if err != nil {
			return nil, fmt.Errorf("gather column %q: %w", schema.Field(c).Name, err)
		}
		return a, nil
	}
	defer d.Release()
	return array.MakeFromData(d), nil
}

// takeParts gathers one column of a type the fast paths do not handle:
// Take over each part's window, the results joined.
func takeParts(ctx context.Context, col int, parts []gatherPart, mem memory.Allocator) (arrow.Array, error) {
	if len(parts) == 1 {
		return parts[0].w.takeConcatenated(ctx, col, parts[0].idx, mem)
	}
	got := make([]arrow.Array, 0, len(parts))
	defer func() {
		for _, a := range got {
			a.Release()
		}
	}()
	for _, p := range parts {
		a, err := p.w.takeConcatenated(ctx, col, p.idx, mem)
		if err != nil {
			return nil, err
		}
		got = append(got, a)
	}
	return concatenate(got, mem)
}

// gathersFast reports whether every column of schema is gathered by a
// path of gatherBy's own, one that writes every byte of the buffers it
// makes (but for the bits past the last row of a bitmap's last byte).
func gathersFast(schema *arrow.Schema) bool {
	for _, f := range schema.Fields() {
		switch dt := f.Type; {
		case dt.ID() == arrow.BOOL, dt.ID() == arrow.STRING, dt.ID() == arrow.BINARY,
			dt.ID() == arrow.LARGE_STRING, dt.ID() == arrow.LARGE_BINARY, fixedWidth(dt):
		default:
			return false
		}
	}
	return true
}

// fixedWidth reports whether dt stores each value in whole bytes of one
// buffer, with no children or dictionary.
func fixedWidth(dt arrow.DataType) bool {
	fw, ok := dt.(arrow.FixedWidthDataType)
	if !ok || dt.ID() == arrow.DICTIONARY || dt.ID() == arrow.EXTENSION {
		return false
	}
	return fw.BitWidth() >= 8 && fw.BitWidth()%8 == 0 && len(dt.Layout().Buffers) == 2
}

// withValidity makes the data of a gathered fixed-width column from its
// values and the validity gathered from in; the data takes over vals.
func withValidity(dt arrow.DataType, in []arrow.ArrayData, g *gatherPlan, vals *memory.Buffer, mem memory.Allocator) arrow.ArrayData {
	valid, nulls := validity(in, g, mem)
	d := array.NewData(dt, g.n, []*memory.Buffer{valid, vals}, nil, nulls, 0)
	vals.Release()
	if valid != nil {
		valid.Release()
	}
	return d
}

// validity gathers the null bitmap, or returns nil if no row is null.
func validity(in []arrow.ArrayData, g *gatherPlan, mem memory.Allocator) (*memory.Buffer, int) {
	// A slice's ArrayData may not know its null count (-1): only a known
	// zero, or no bitmap, means no nulls.
	mayBeNull := func(p arrow.ArrayData) bool { return p.Buffers()[0] != nil && p.NullN() != 0 }
	some := false
	for _, p := range in {
		some = some || mayBeNull(p)
	}
	if !some {
		return nil, 0
	}
	buf := memory.NewResizableBuffer(mem)
	buf.Resize(int(bitutil.BytesForBits(int64(g.n))))
	out := buf.Bytes()
	if g.spans != nil {
		// A run's bits move as one copy.
		at := 0
		for _, s := range g.spans {
			p := in[s.rec]
			if mayBeNull(p) {
				bitutil.CopyBitmap(p.Buffers()[0].Bytes(), p.Offset()+int(s.row), int(s.n), out, at)
			} else {
				bitutil.SetBitsTo(out, int64(at), int64(s.n), true)
			}
			at += int(s.n)
		}
		clearPastEnd(out, g.n)
		return buf, g.n - bitutil.CountSetBits(out, 0, g.n)
	}
	nulls := 0
	for i, s := range g.sources() {
		p := in[s.rec]
		valid := true
		if mayBeNull(p) {
			valid = bitutil.BitIsSet(p.Buffers()[0].Bytes(), p.Offset()+int(s.row))
		}
		bitutil.SetBitTo(out, i, valid)
		if !valid {
			nulls++
		}
	}
	clearPastEnd(out, g.n)
	return buf, nulls
}

// clearPastEnd clears the bits of a bitmap of n bits past the last, in its
// last byte: a buffer that came unzeroed holds whatever was there, and
// code that reads a bitmap by whole bytes or words is right only where
// they are zero, as arrow-go's own builders leave them.
func clearPastEnd(bitmap []byte, n int) {
	if r := n % 8; r != 0 {
		bitmap[n/8] &= byte(1)<<r - 1
	}
}

func gatherFixed(dt arrow.DataType, in []arrow.ArrayData, g *gatherPlan, mem memory.Allocator) arrow.ArrayData {
	width := dt.(arrow.FixedWidthDataType).BitWidth() / 8
	vals := memory.NewResizableBuffer(mem)
	vals.Resize(g.n * width)
	out := vals.Bytes()
	bufs := make([][]byte, len(in))
	for k, p := range in {
		bufs[k] = p.Buffers()[1].Bytes()[p.Offset()*width:]
	}
	switch {
	case g.spans != nil:
		at := 0
		for _, s := range g.spans {
			n := int(s.n) * width
			copy(out[at:at+n], bufs[s.rec][int(s.row)*width:])
			at += n
		}
	case width == 8 && g.inv != nil:
		scatterWords(arrow.Uint64Traits.CastFromBytes, out, bufs, in, g.inv)
	case width == 4 && g.inv != nil:
		scatterWords(arrow.Uint32Traits.CastFromBytes, out, bufs, in, g.inv)
	case width == 8:
		words(arrow.Uint64Traits.CastFromBytes, out, bufs, g.src)
	case width == 4:
		words(arrow.Uint32Traits.CastFromBytes, out, bufs, g.src)
	default:
		for i, s := range g.sources() {
			copy(out[i*width:(i+1)*width], bufs[s.rec][int(s.row)*width:])
		}
	}
	return withValidity(dt, in, g, vals, mem)
}

// words gathers values of one machine word each.
func words[W uint32 | uint64](cast func([]byte) []W, out []byte, bufs [][]byte, src []source) {
	o := cast(out)
	in := make([][]W, len(bufs))
	for k, b := range bufs {
		in[k] = cast(b)
	}
	for i, s := range src {
		o[i] = in[s.rec][s.row]
	}
}

// scatterWords is words for a permutation: each source value in order to
// its output row.
func scatterWords[W uint32 | uint64](cast func([]byte) []W, out []byte, bufs [][]byte, in []arrow.ArrayData, inv []int32) {
	o := cast(out)
	at := 0
	for k, b := range bufs {
		n := in[k].Len()
		for j, v := range cast(b)[:n] {
			o[inv[at+j]] = v
		}
		at += n
	}
}

func gatherBool(dt arrow.DataType, in []arrow.ArrayData, g *gatherPlan, mem memory.Allocator) arrow.ArrayData {
	vals := memory.NewResizableBuffer(mem)
	vals.Resize(int(bitutil.BytesForBits(int64(g.n))))
	out := vals.Bytes()
	if g.spans != nil {
		at := 0
		for _, s := range g.spans {
			p := in[s.rec]
			bitutil.CopyBitmap(p.Buffers()[1].Bytes(), p.Offset()+int(s.row), int(s.n), out, at)
			at += int(s.n)
		}
	} else {
		for i, s := range g.sources() {
			p := in[s.rec]
			bitutil.SetBitTo(out, i, bitutil.BitIsSet(p.Buffers()[1].Bytes(), p.Offset()+int(s.row)))
		}
	}
	clearPastEnd(out, g.n)
	return withValidity(dt, in, g, vals, mem)
}

// gatherVar gathers string or binary values: one pass over the offsets
// (lengths, and the total), then the bytes, a copy per row or per run.
func gatherVar[O int32 | int64](dt arrow.DataType, in []arrow.ArrayData, g *gatherPlan, mem memory.Allocator, cast func([]byte) []O) arrow.ArrayData {
	offs := make([][]O, len(in))
	data := make([][]byte, len(in))
	for k, p := range in {
		offs[k] = cast(p.Buffers()[1].Bytes())[p.Offset():]
		if b := p.Buffers()[2]; b != nil {
			data[k] = b.Bytes()
		}
	}
	offBuf := memory.NewResizableBuffer(mem)
	var zero O
	offBuf.Resize((g.n + 1) * sizeOf(zero))
	out := cast(offBuf.Bytes())
	if g.used != nil && g.spans == nil && g.inv == nil {
		return gatherVarUsed(dt, in, g, mem, offBuf, out, offs, data)
	}
	var total O
	if g.spans != nil {
		at := 0
		for _, s := range g.spans {
			o := offs[s.rec][s.row : s.row+s.n+1]
			base := total - o[0]
			for j := range int(s.n) {
				out[at+j] = base + o[j]
			}
			at += int(s.n)
			total = base + o[s.n]
		}
	} else if g.inv != nil {
		// Each source value's length to its output row, in source
		// order, then the lengths summed into offsets.
		at := 0
		for k, p := range in {
			o := offs[k]
			for j := range p.Len() {
				out[g.inv[at+j]] = o[j+1] - o[j]
			}
			at += p.Len()
		}
		for i := range g.n {
			l := out[i]
			out[i] = total
			total += l
		}
	} else {
		for i, s := range g.src {
			o := offs[s.rec]
			out[i] = total
			total += o[s.row+1] - o[s.row]
		}
	}
	out[g.n] = total
	valBuf := memory.NewResizableBuffer(mem)
	// Room past the end for a short value's 32-byte move (below), kept
	// when there are no bytes at all (Resize would give it back).
	valBuf.Reserve(int(total) + 32)
	valBuf.ResizeNoShrink(int(total))
	vals := valBuf.Buf()
	switch {
	case g.spans != nil:
		row := 0
		for _, s := range g.spans {
			o := offs[s.rec]
			copy(vals[out[row]:], data[s.rec][o[s.row]:o[s.row+s.n]])
			row += int(s.n)
		}
	case g.inv != nil:
		at := 0
		for k, p := range in {
			o, d := offs[k], data[k]
			inv := g.inv[at : at+p.Len()]
			for j, i := range inv {
				a, b := o[j], o[j+1]
				moveExact(vals[out[i]:out[i]+b-a], d[a:b])
			}
			at += p.Len()
		}
	default:
		// Values are written in output order, so a short value can move
		// as one 32-byte block, its overshoot overwritten by the values
		// after it (the last one's falls in the room reserved past the
		// end): a copy call per value of a few bytes costs several times
		// the move.
		for i, s := range g.src {
			o := offs[s.rec]
			putValue(vals, data[s.rec], out[i], o[s.row], o[s.row+1])
		}
	}
	return varData(dt, in, g, mem, offBuf, valBuf)
}

// putValue writes src[a:b] at vals[at:]. Values are written in output
// order, so a short one moves as 32 bytes, its overshoot overwritten by the
// values after it (the last one's falls in room reserved past the end): a
// copy call per value of a few bytes costs several times that.
func putValue[O int32 | int64](vals, src []byte, at, a, b O) {
	if b-a <= 32 && int(a)+32 <= len(src) {
		*(*[16]byte)(vals[at : at+16]) = [16]byte(src[a : a+16])
		*(*[16]byte)(vals[at+16 : at+32]) = [16]byte(src[a+16 : a+32])
		return
	}
	copy(vals[at:at+b-a], src[a:b])
}

// moveExact copies src to dst (of the same length) without a call for a
// value of 4 to 32 bytes: two overlapping loads and stores of the widest
// size that fits. It writes nothing outside dst, so values can be written in
// any order (a permutation writes them at random, where putValue's
// overshoot would clobber values already in place).
func moveExact(dst, src []byte) {
	n := len(src)
	switch {
	case n > 32 || n < 4 || len(dst) != n:
		copy(dst, src)
	case n > 16:
		*(*[16]byte)(dst) = [16]byte(src)
		*(*[16]byte)(dst[n-16:]) = [16]byte(src[n-16:])
	case n >= 8:
		binary.LittleEndian.PutUint64(dst, binary.LittleEndian.Uint64(src))
		binary.LittleEndian.PutUint64(dst[n-8:], binary.LittleEndian.Uint64(src[n-8:]))
	default:
		binary.LittleEndian.PutUint32(dst, binary.LittleEndian.Uint32(src))
		binary.LittleEndian.PutUint32(dst[n-4:], binary.LittleEndian.Uint32(src[n-4:]))
	}
}

// varData is the string or binary column of the gathered offsets and
// values, with its nulls; it takes over both buffers.
func varData(dt arrow.DataType, in []arrow.ArrayData, g *gatherPlan, mem memory.Allocator, offBuf, valBuf *memory.Buffer) arrow.ArrayData {
	valid, nulls := validity(in, g, mem)
	d := array.NewData(dt, g.n, []*memory.Buffer{valid, offBuf, valBuf}, nil, nulls, 0)
	offBuf.Release()
	valBuf.Release()
	if valid != nil {
		valid.Release()
	}
	return d
}

// gatherVarUsed is gatherVar row by row where the rows each record batch
// gives are known: their bytes size the values up front, and one pass
// writes each row's offset and bytes.
func gatherVarUsed[O int32 | int64](dt arrow.DataType, in []arrow.ArrayData, g *gatherPlan, mem memory.Allocator, offBuf *memory.Buffer, out []O, offs [][]O, data [][]byte) arrow.ArrayData {
	var size O
	for k, u := range g.used {
		if u[1] > u[0] {
			size += offs[k][u[1]] - offs[k][u[0]]
		}
	}
	valBuf := memory.NewResizableBuffer(mem)
	valBuf.Reserve(int(size) + 32) // room for the last value's 32-byte move
	valBuf.ResizeNoShrink(int(size))
	vals := valBuf.Buf()
	var total O
	for i, s := range g.src {
		o := offs[s.rec]
		a, b := o[s.row], o[s.row+1]
		out[i] = total
		putValue(vals, data[s.rec], total, a, b)
		total += b - a
	}
	out[g.n] = total
	return varData(dt, in, g, mem, offBuf, valBuf)
}

func sizeOf[O int32 | int64](O) int {
	var o O
	switch any(o).(type) {
	case int32:
		return 4
	}
	return 8
}

// takeConcatenated gathers one column of a type the fast paths do not
// handle, from the window concatenated once (on first need).
func (w *window) takeConcatenated(ctx context.Context, col int, idx []int32, mem memory.Allocator) (arrow.Array, error) {
	w.once.Do(func() {
		if len(w.recs) == 1 {
			w.recs[0].Retain()
			w.whole = w.recs[0]
			return
		}
		w.whole, w.wholeErr = arrowConcat(w.recs[0].Schema(), w.recs, mem)
	})
	if w.wholeErr != nil {
		return nil, w.wholeErr
	}
	ib := array.NewInt32Builder(mem)
	ib.AppendValues(idx, nil)
	indices := ib.NewInt32Array()
	ib.Release()
	defer indices.Release()
	return compute.TakeArrayOpts(compute.WithAllocator(ctx, mem), w.whole.Column(col), indices, compute.TakeOptions{BoundsCheck: false})
}
