package engine

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// concatenate is array.Concatenate for every type the readers make:
// arrow-go's has no unions, which ORC's uniontype and Avro's unions of
// several types become, so a batch that spans two row groups, and every
// shuffled window, of such a column failed to stream.
func concatenate(parts []arrow.Array, mem memory.Allocator) (arrow.Array, error) {
	if len(parts) > 0 && parts[0].DataType().ID() == arrow.DENSE_UNION {
		return concatDenseUnion(parts, mem)
	}
	return array.Concatenate(parts, mem)
}

// concatDenseUnion joins dense unions. Each part's rows point into its
// members (children) at offsets of their own, and a part cut from a
// larger array keeps the whole of each member: the member values it
// points to, from the least offset to the greatest, are what is copied,
// and its rows' offsets move to where those values land.
func concatDenseUnion(parts []arrow.Array, mem memory.Allocator) (arrow.Array, error) {
	dt := parts[0].DataType().(*arrow.DenseUnionType)
	members := len(dt.Fields())
	rows := 0
	for _, p := range parts {
		rows += p.Len()
	}
	codes := memory.NewResizableBuffer(mem)
	codes.Resize(rows)
	offsets := memory.NewResizableBuffer(mem)
	offsets.Resize(rows * arrow.Int32SizeBytes)
	defer codes.Release()
	defer offsets.Release()
	outCodes := arrow.Int8Traits.CastFromBytes(codes.Bytes())
	outOffsets := arrow.Int32Traits.CastFromBytes(offsets.Bytes())
	pieces := make([][]arrow.Array, members)
	defer func() {
		for _, ps := range pieces {
			for _, p := range ps {
				p.Release()
			}
		}
	}()
	base := make([]int32, members)
	lo, hi := make([]int32, members), make([]int32, members)
	at := 0
	for _, a := range parts {
		u, ok := a.(*array.DenseUnion)
		if !ok || !arrow.TypeEqual(u.DataType(), dt) {
			return nil, fmt.Errorf("concatenate a dense union with %s", a.DataType())
		}
		n := u.Len()
		if n == 0 {
			continue // arrow-go holds no offsets for it
		}
		for m := range members {
			lo[m], hi[m] = -1, -1
		}
		offs := u.RawValueOffsets()[:n]
		for r := range n {
			m, o := u.ChildID(r), offs[r]
			if o < 0 {
				return nil, fmt.Errorf("dense union row %d: offset %d into member %d", r, o, m)
			}
			if lo[m] < 0 || o < lo[m] {
				lo[m] = o
			}
			if o+1 > hi[m] {
				hi[m] = o + 1
			}
		}
		for r := range n {
			m := u.ChildID(r)
			outCodes[at+r] = int8(u.TypeCode(r))
			outOffsets[at+r] = offs[r] - lo[m] + base[m]
		}
		for m := range members {
			if lo[m] < 0 {
				continue
			}
			child := u.Field(m)
			if int(hi[m]) > child.Len() {
				return nil, fmt.Errorf("dense union member %d: offset %d past its %d values", m, hi[m]-1, child.Len())
			}
			pieces[m] = append(pieces[m], array.NewSlice(child, int64(lo[m]), int64(hi[m])))
			base[m] += hi[m] - lo[m]
		}
		at += n
	}
	children := make([]arrow.Array, members)
	defer func() {
		for _, c := range children {
			if c != nil {
				c.Release()
			}
		}
	}()
	for m, f := range dt.Fields() {
		var err error
		switch len(pieces[m]) {
		case 0:
			children[m] = array.MakeArrayOfNull(mem, f.Type, 0)
		case 1:
			pieces[m][0].Retain()
			children[m] = pieces[m][0]
		default:
			children[m], err = concatenate(pieces[m], mem)
		}
		if err != nil {
			return nil, fmt.Errorf("dense union member %q: %w", f.Name, err)
		}
	}
	return array.NewDenseUnion(dt, rows, children, codes, offsets, 0), nil
}
