package stream

import (
	"context"
	"fmt"
	"sort"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// A shuffled batch is gathered straight from the window's decoded record
// batches: no concatenation of the window first, and for fixed-width and
// string/binary columns no compute kernel, whose per-call set-up and
// zero-then-copy string path cost twice the copy itself. Other types (lists,
// structs, dictionaries) fall back to arrow's Take over the concatenated
// window.

// source is where one output row comes from.
type source struct {
	rec int32
	row int32
}

// locate maps window rows to (record batch, row).
func locate(starts []int64, idx []int32) []source {
	out := make([]source, len(idx))
	for i, r := range idx {
		k := sort.Search(len(starts), func(k int) bool { return starts[k] > int64(r) }) - 1
		out[i] = source{int32(k), int32(int64(r) - starts[k])}
	}
	return out
}

// gatherWindow builds the batch of w's rows at idx (window row numbers).
func gatherWindow(ctx context.Context, schema *arrow.Schema, w *window, idx []int32, mem memory.Allocator) (arrow.RecordBatch, error) {
	src := locate(w.starts, idx)
	cols := make([]arrow.Array, schema.NumFields())
	defer func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}()
	parts := make([]arrow.ArrayData, len(w.recs))
	for c := range cols {
		for k, r := range w.recs {
			parts[k] = r.Column(c).Data()
		}
		dt := schema.Field(c).Type
		var d arrow.ArrayData
		switch {
		case dt.ID() == arrow.BOOL:
			d = gatherBool(dt, parts, src, mem)
		case dt.ID() == arrow.STRING || dt.ID() == arrow.BINARY:
			d = gatherVar[int32](dt, parts, src, mem, arrow.Int32Traits.CastFromBytes)
		case dt.ID() == arrow.LARGE_STRING || dt.ID() == arrow.LARGE_BINARY:
			d = gatherVar[int64](dt, parts, src, mem, arrow.Int64Traits.CastFromBytes)
		case fixedWidth(dt):
			d = gatherFixed(dt, parts, src, mem)
		default:
			a, err := w.takeConcatenated(ctx, c, idx, mem)
			if err != nil {
				return nil, fmt.Errorf("gather column %q: %w", schema.Field(c).Name, err)
			}
			cols[c] = a
			continue
		}
		cols[c] = array.MakeFromData(d)
		d.Release()
	}
	return array.NewRecordBatch(schema, cols, int64(len(idx))), nil
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

// validity gathers the null bitmap, or returns nil if no row is null.
func validity(parts []arrow.ArrayData, src []source, mem memory.Allocator) (*memory.Buffer, int) {
	// A slice's ArrayData may not know its null count (-1): only a known
	// zero, or no bitmap, means no nulls.
	mayBeNull := func(p arrow.ArrayData) bool { return p.Buffers()[0] != nil && p.NullN() != 0 }
	some := false
	for _, p := range parts {
		some = some || mayBeNull(p)
	}
	if !some {
		return nil, 0
	}
	buf := memory.NewResizableBuffer(mem)
	buf.Resize(int(bitutil.BytesForBits(int64(len(src)))))
	out := buf.Bytes()
	nulls := 0
	for i, s := range src {
		p := parts[s.rec]
		valid := true
		if mayBeNull(p) {
			valid = bitutil.BitIsSet(p.Buffers()[0].Bytes(), p.Offset()+int(s.row))
		}
		bitutil.SetBitTo(out, i, valid)
		if !valid {
			nulls++
		}
	}
	return buf, nulls
}

func gatherFixed(dt arrow.DataType, parts []arrow.ArrayData, src []source, mem memory.Allocator) arrow.ArrayData {
	width := dt.(arrow.FixedWidthDataType).BitWidth() / 8
	vals := memory.NewResizableBuffer(mem)
	vals.Resize(len(src) * width)
	out := vals.Bytes()
	in := make([][]byte, len(parts))
	for k, p := range parts {
		in[k] = p.Buffers()[1].Bytes()[p.Offset()*width:]
	}
	switch width {
	case 8:
		for i, s := range src {
			copy(out[i*8:i*8+8], in[s.rec][int(s.row)*8:])
		}
	case 4:
		for i, s := range src {
			copy(out[i*4:i*4+4], in[s.rec][int(s.row)*4:])
		}
	default:
		for i, s := range src {
			copy(out[i*width:(i+1)*width], in[s.rec][int(s.row)*width:])
		}
	}
	valid, nulls := validity(parts, src, mem)
	d := array.NewData(dt, len(src), []*memory.Buffer{valid, vals}, nil, nulls, 0)
	vals.Release()
	if valid != nil {
		valid.Release()
	}
	return d
}

func gatherBool(dt arrow.DataType, parts []arrow.ArrayData, src []source, mem memory.Allocator) arrow.ArrayData {
	vals := memory.NewResizableBuffer(mem)
	vals.Resize(int(bitutil.BytesForBits(int64(len(src)))))
	out := vals.Bytes()
	for i, s := range src {
		p := parts[s.rec]
		bitutil.SetBitTo(out, i, bitutil.BitIsSet(p.Buffers()[1].Bytes(), p.Offset()+int(s.row)))
	}
	valid, nulls := validity(parts, src, mem)
	d := array.NewData(dt, len(src), []*memory.Buffer{valid, vals}, nil, nulls, 0)
	vals.Release()
	if valid != nil {
		valid.Release()
	}
	return d
}

// gatherVar gathers string or binary values: lengths first, then one copy.
func gatherVar[O int32 | int64](dt arrow.DataType, parts []arrow.ArrayData, src []source, mem memory.Allocator, cast func([]byte) []O) arrow.ArrayData {
	offs := make([][]O, len(parts))
	data := make([][]byte, len(parts))
	for k, p := range parts {
		offs[k] = cast(p.Buffers()[1].Bytes())[p.Offset():]
		if b := p.Buffers()[2]; b != nil {
			data[k] = b.Bytes()
		}
	}
	offBuf := memory.NewResizableBuffer(mem)
	var zero O
	offBuf.Resize((len(src) + 1) * int(sizeOf(zero)))
	out := cast(offBuf.Bytes())
	var total O
	for i, s := range src {
		o := offs[s.rec]
		out[i] = total
		total += o[s.row+1] - o[s.row]
	}
	out[len(src)] = total
	valBuf := memory.NewResizableBuffer(mem)
	valBuf.Resize(int(total))
	vals := valBuf.Bytes()
	for i, s := range src {
		o := offs[s.rec]
		copy(vals[out[i]:out[i+1]], data[s.rec][o[s.row]:o[s.row+1]])
	}
	valid, nulls := validity(parts, src, mem)
	d := array.NewData(dt, len(src), []*memory.Buffer{valid, offBuf, valBuf}, nil, nulls, 0)
	offBuf.Release()
	valBuf.Release()
	if valid != nil {
		valid.Release()
	}
	return d
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
		w.whole, w.wholeErr = concat(w.recs[0].Schema(), w.recs, mem)
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
