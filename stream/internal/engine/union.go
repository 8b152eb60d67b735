package engine

import (
	"fmt"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// concatenate is array.Concatenate for every type the readers make:
// arrow-go's has no unions, which ORC's uniontype and Avro's unions of
// several types become, so a batch that spans two row groups, and every
// shuffled window, of such a column failed to stream. Columns holding a
// union (at any depth: a record or a list of them) are joined here, the
// rest by arrow-go.
func concatenate(parts []arrow.Array, mem memory.Allocator) (arrow.Array, error) {
	if len(parts) == 0 || !holdsUnion(parts[0].DataType()) {
		return array.Concatenate(parts, mem)
	}
	switch dt := parts[0].DataType(); dt.ID() {
	case arrow.DENSE_UNION:
		return concatDenseUnion(parts, mem)
	case arrow.STRUCT:
		return concatStruct(parts, mem)
	case arrow.LIST, arrow.LARGE_LIST, arrow.MAP:
		return concatList(parts, mem)
	default:
		return nil, fmt.Errorf("concatenate %s: not implemented for a union inside this type", dt)
	}
}

// holdsUnion reports whether dt is or holds a union.
func holdsUnion(dt arrow.DataType) bool {
	switch dt := dt.(type) {
	case arrow.UnionType:
		return true
	case arrow.NestedType:
		for _, f := range dt.Fields() {
			if holdsUnion(f.Type) {
				return true
			}
		}
	}
	return false
}

// concatStruct joins structs field by field (each field's rows of each
// part, which the struct's offset applies to), and their validity.
func concatStruct(parts []arrow.Array, mem memory.Allocator) (arrow.Array, error) {
	dt := parts[0].DataType().(*arrow.StructType)
	fields := make([]arrow.ArrayData, dt.NumFields())
	defer func() {
		for _, f := range fields {
			if f != nil {
				f.Release()
			}
		}
	}()
	for i := range fields {
		kids := make([]arrow.Array, len(parts))
		for k, p := range parts {
			kids[k] = p.(*array.Struct).Field(i)
		}
		joined, err := concatenate(kids, mem)
		if err != nil {
			return nil, fmt.Errorf("field %q: %w", dt.Field(i).Name, err)
		}
		fields[i] = joined.Data()
		fields[i].Retain()
		joined.Release()
	}
	valid, nulls, rows := joinValidity(parts, mem)
	if valid != nil {
		defer valid.Release()
	}
	d := array.NewData(dt, rows, []*memory.Buffer{valid}, fields, nulls, 0)
	defer d.Release()
	return array.MakeFromData(d), nil
}

// concatList joins lists (maps among them): each part's values from its
// first row's start to its last row's end, its offsets moved to where
// those values land.
func concatList(parts []arrow.Array, mem memory.Allocator) (arrow.Array, error) {
	dt := parts[0].DataType()
	large := dt.ID() == arrow.LARGE_LIST
	var ends []int64
	values := make([]arrow.Array, 0, len(parts))
	defer func() { release(values) }()
	base := int64(0)
	ends = append(ends, 0)
	for _, p := range parts {
		l := p.(array.ListLike)
		n := p.Len()
		if n == 0 {
			continue
		}
		lo, _ := l.ValueOffsets(0)
		_, hi := l.ValueOffsets(n - 1)
		for r := range n {
			_, e := l.ValueOffsets(r)
			ends = append(ends, e-lo+base)
		}
		values = append(values, array.NewSlice(l.ListValues(), lo, hi))
		base += hi - lo
	}
	var child arrow.Array
	var err error
	if len(values) == 0 {
		child = array.MakeArrayOfNull(mem, parts[0].(array.ListLike).ListValues().DataType(), 0)
	} else if child, err = concatenate(values, mem); err != nil {
		return nil, err
	}
	defer child.Release()
	var offsets *memory.Buffer
	if large {
		offsets = memory.NewBufferBytes(arrow.Int64Traits.CastToBytes(ends))
	} else {
		small := make([]int32, len(ends))
		for i, e := range ends {
			if e > 1<<31-1 {
				return nil, fmt.Errorf("concatenate %s: %d values are more than 32-bit offsets hold", dt, e)
			}
			small[i] = int32(e)
		}
		offsets = memory.NewBufferBytes(arrow.Int32Traits.CastToBytes(small))
	}
	valid, nulls, rows := joinValidity(parts, mem)
	if valid != nil {
		defer valid.Release()
	}
	d := array.NewData(dt, rows, []*memory.Buffer{valid, offsets}, []arrow.ArrayData{child.Data()}, nulls, 0)
	defer d.Release()
	return array.MakeFromData(d), nil
}

// joinValidity is the parts' validity bitmaps end to end (nil where no
// row is null), their nulls and their rows.
func joinValidity(parts []arrow.Array, mem memory.Allocator) (*memory.Buffer, int, int) {
	rows, nulls := 0, 0
	for _, p := range parts {
		rows += p.Len()
		nulls += p.NullN()
	}
	if nulls == 0 {
		return nil, 0, rows
	}
	buf := memory.NewResizableBuffer(mem)
	buf.Resize(int(bitutil.BytesForBits(int64(rows))))
	bits := buf.Bytes()
	at := 0
	for _, p := range parts {
		if bm := p.NullBitmapBytes(); p.NullN() > 0 && len(bm) > 0 {
			bitutil.CopyBitmap(bm, p.Data().Offset(), p.Len(), bits, at)
		} else {
			bitutil.SetBitsTo(bits, int64(at), int64(p.Len()), true)
		}
		at += p.Len()
	}
	return buf, nulls, rows
}

func release(as []arrow.Array) {
	for _, a := range as {
		a.Release()
	}
}

// sliceMu serializes the slicing of batches that hold a union with a
// member of type null (Avro's null branch). arrow-go makes a union's
// members anew for every slice, over the members' shared ArrayData, and
// its Null array writes its null count into that ArrayData each time
// (array.Null.setData): the same value, but a data race where two
// goroutines slice one window at once.
var sliceMu sync.Mutex

// newSlice is rec.NewSlice(lo, hi), serialized where rec holds a union
// with a null member (see sliceMu).
func newSlice(rec arrow.RecordBatch, lo, hi int64) arrow.RecordBatch {
	if !unionOfNull(rec.Schema()) {
		return rec.NewSlice(lo, hi)
	}
	sliceMu.Lock()
	defer sliceMu.Unlock()
	return rec.NewSlice(lo, hi)
}

// unionsOfNull caches unionOfNull by schema.
var unionsOfNull sync.Map // *arrow.Schema -> bool

// unionOfNull reports whether a field of s holds a union with a member of
// type null, at any depth.
func unionOfNull(s *arrow.Schema) bool {
	if v, ok := unionsOfNull.Load(s); ok {
		return v.(bool)
	}
	var has func(dt arrow.DataType, inUnion bool) bool
	has = func(dt arrow.DataType, inUnion bool) bool {
		if inUnion && dt.ID() == arrow.NULL {
			return true
		}
		n, ok := dt.(arrow.NestedType)
		if !ok {
			return false
		}
		_, isUnion := dt.(arrow.UnionType)
		for _, f := range n.Fields() {
			if has(f.Type, isUnion) {
				return true
			}
		}
		return false
	}
	found := false
	for _, f := range s.Fields() {
		if has(f.Type, false) {
			found = true
			break
		}
	}
	unionsOfNull.Store(s, found)
	return found
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
