package stream

import (
	"context"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// interleave builds the batch whose row i is row src[i].row of
// parts[src[i].rec]: the mix's rows put together from the runs its sources
// gave. The runs are read in order, so unlike a shuffled window's gather
// nothing is searched and the reads stay in cache; 8- and 4-byte values are
// moved as words rather than one small copy each. Column types without a
// fast path go through gatherWindow.
func interleave(ctx context.Context, schema *arrow.Schema, parts []arrow.RecordBatch, src []source, mem memory.Allocator) (arrow.RecordBatch, error) {
	for _, f := range schema.Fields() {
		switch dt := f.Type; {
		case dt.ID() == arrow.BOOL, dt.ID() == arrow.STRING, dt.ID() == arrow.BINARY,
			dt.ID() == arrow.LARGE_STRING, dt.ID() == arrow.LARGE_BINARY, fixedWidth(dt):
		default:
			return interleaveSlow(ctx, schema, parts, src, mem)
		}
	}
	cols := make([]arrow.Array, schema.NumFields())
	defer func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}()
	data := make([]arrow.ArrayData, len(parts))
	for c := range cols {
		for k, r := range parts {
			data[k] = r.Column(c).Data()
		}
		var d arrow.ArrayData
		switch dt := schema.Field(c).Type; {
		case dt.ID() == arrow.BOOL:
			d = gatherBool(dt, data, src, mem)
		case dt.ID() == arrow.STRING || dt.ID() == arrow.BINARY:
			d = gatherVar[int32](dt, data, src, mem, arrow.Int32Traits.CastFromBytes)
		case dt.ID() == arrow.LARGE_STRING || dt.ID() == arrow.LARGE_BINARY:
			d = gatherVar[int64](dt, data, src, mem, arrow.Int64Traits.CastFromBytes)
		case dt.(arrow.FixedWidthDataType).BitWidth() == 64:
			d = interleaveWords(dt, data, src, mem, arrow.Uint64Traits.CastFromBytes, 8)
		case dt.(arrow.FixedWidthDataType).BitWidth() == 32:
			d = interleaveWords(dt, data, src, mem, arrow.Uint32Traits.CastFromBytes, 4)
		default:
			d = gatherFixed(dt, data, src, mem)
		}
		cols[c] = array.MakeFromData(d)
		d.Release()
	}
	return array.NewRecordBatch(schema, cols, int64(len(src))), nil
}

// interleaveWords is gatherFixed for values of one machine word.
func interleaveWords[W uint32 | uint64](dt arrow.DataType, parts []arrow.ArrayData, src []source, mem memory.Allocator, cast func([]byte) []W, width int) arrow.ArrayData {
	vals := memory.NewResizableBuffer(mem)
	vals.Resize(len(src) * width)
	out := cast(vals.Bytes())[:len(src)]
	in := make([][]W, len(parts))
	for k, p := range parts {
		in[k] = cast(p.Buffers()[1].Bytes())[p.Offset():]
	}
	for i, s := range src {
		out[i] = in[s.rec][s.row]
	}
	valid, nulls := validity(parts, src, mem)
	d := array.NewData(dt, len(src), []*memory.Buffer{valid, vals}, nil, nulls, 0)
	vals.Release()
	if valid != nil {
		valid.Release()
	}
	return d
}

// interleaveSlow is interleave through gatherWindow, for column types the
// word and string paths do not cover.
func interleaveSlow(ctx context.Context, schema *arrow.Schema, parts []arrow.RecordBatch, src []source, mem memory.Allocator) (arrow.RecordBatch, error) {
	w := &window{recs: parts, starts: make([]int64, len(parts))}
	for i, p := range parts {
		w.starts[i] = w.rows
		w.rows += p.NumRows()
	}
	idx := make([]int32, len(src))
	for i, s := range src {
		idx[i] = int32(w.starts[s.rec]) + s.row
	}
	out, err := gatherWindow(ctx, schema, w, idx, mem)
	if w.whole != nil {
		w.whole.Release()
	}
	return out, err
}
