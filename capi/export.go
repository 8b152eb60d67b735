//go:build cgo

package main

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// exportable is b as the C data interface means it. A batch cut from a
// window slices its struct columns, and arrow-go's exporter writes such a
// struct with its offset and with children that are already sliced: a
// consumer that follows the specification (Arrow C++, pyarrow, the Python
// package) adds the parent's offset to each child's, reads the children
// at twice the offset and finds them too short. Each sliced struct, at any
// depth, crosses instead at offset 0 over its sliced children: its
// validity bitmap is copied (a bit a row), its values are not. Columns
// without one cross as they are. The caller releases what it gets (b
// itself, retained, where nothing changed).
func exportable(b arrow.RecordBatch) (arrow.RecordBatch, error) {
	var cols []arrow.Array
	for i, c := range b.Columns() {
		fixed, err := unsliced(c)
		if err != nil {
			for _, made := range cols {
				made.Release()
			}
			return nil, fmt.Errorf("column %q: %w", b.ColumnName(i), err)
		}
		if fixed == nil && cols == nil {
			continue
		}
		if cols == nil {
			cols = make([]arrow.Array, 0, b.NumCols())
			for _, prev := range b.Columns()[:i] {
				prev.Retain()
				cols = append(cols, prev)
			}
		}
		if fixed == nil {
			c.Retain()
			fixed = c
		}
		cols = append(cols, fixed)
	}
	if cols == nil {
		b.Retain()
		return b, nil
	}
	defer func() {
		for _, c := range cols {
			c.Release()
		}
	}()
	return array.NewRecordBatch(b.Schema(), cols, b.NumRows()), nil
}

// unsliced is a with every struct inside it at offset 0 over its sliced
// children (the same rows at the same positions), or nil where a holds no
// sliced struct. A sparse union cut the same way has no such form here
// (no reader makes one): it is an error.
func unsliced(a arrow.Array) (arrow.Array, error) {
	d := a.Data()
	switch a := a.(type) {
	case *array.Struct:
		kids, changed, err := unslicedKids(a.NumField(), a.Field)
		defer release(kids)
		if err != nil || !changed && d.Offset() == 0 {
			return nil, err
		}
		var valid *memory.Buffer
		if bits := d.Buffers()[0]; bits != nil && a.NullN() > 0 {
			valid = memory.NewResizableBuffer(memory.DefaultAllocator)
			valid.Resize(int(bitutil.BytesForBits(int64(a.Len()))))
			bitutil.CopyBitmap(bits.Bytes(), d.Offset(), a.Len(), valid.Bytes(), 0)
			defer valid.Release()
		}
		return rebuilt(d, []*memory.Buffer{valid}, kids, 0), nil
	case array.ListLike:
		k, err := unsliced(a.ListValues())
		if k == nil || err != nil {
			return nil, err
		}
		defer k.Release()
		return rebuilt(d, d.Buffers(), []arrow.Array{k}, d.Offset()), nil
	case array.Union:
		if a.Mode() == arrow.SparseMode && d.Offset() != 0 {
			return nil, fmt.Errorf("a sparse union cut from a larger array (%s) cannot cross the C data interface", a.DataType())
		}
		kids, changed, err := unslicedKids(a.NumFields(), a.Field)
		defer release(kids)
		if err != nil || !changed {
			return nil, err
		}
		return rebuilt(d, d.Buffers(), kids, d.Offset()), nil
	}
	return nil, nil
}

// unslicedKids is unsliced of each of n children (the child itself,
// retained, where it holds no sliced struct), and whether any changed.
func unslicedKids(n int, child func(int) arrow.Array) ([]arrow.Array, bool, error) {
	kids := make([]arrow.Array, n)
	changed := false
	for i := range kids {
		k, err := unsliced(child(i))
		if err != nil {
			return kids, false, err
		}
		if k != nil {
			changed = true
		} else {
			k = child(i)
			k.Retain()
		}
		kids[i] = k
	}
	return kids, changed, nil
}

// rebuilt is an array of d's type and length over the given buffers and
// children at offset.
func rebuilt(d arrow.ArrayData, bufs []*memory.Buffer, kids []arrow.Array, offset int) arrow.Array {
	data := make([]arrow.ArrayData, len(kids))
	for i, k := range kids {
		data[i] = detached(k.Data())
		defer data[i].Release()
	}
	nd := array.NewData(d.DataType(), d.Len(), bufs, data, d.NullN(), offset)
	defer nd.Release()
	return array.MakeFromData(nd)
}

// detached is d (retained), or, where d holds a null array, a copy of its
// tree of ArrayData over the same buffers. arrow-go's Null array writes
// its null count into the ArrayData it is made over; an array made here
// (on the caller's thread) over a window's would write into data that
// the pipeline's goroutines cut at the same time (the engine serializes
// its own cuts of such windows).
func detached(d arrow.ArrayData) arrow.ArrayData {
	if !holdsNull(d.DataType()) {
		d.Retain()
		return d
	}
	nulls := d.NullN()
	if d.DataType().ID() == arrow.NULL {
		nulls = d.Len() // what the Null array writes: not read, so not raced
	}
	if d.DataType().ID() == arrow.DICTIONARY { // a dictionary array has no children
		dict := detached(d.Dictionary()).(*array.Data)
		defer dict.Release()
		return array.NewDataWithDictionary(d.DataType(), d.Len(), d.Buffers(), nulls, d.Offset(), dict)
	}
	kids := make([]arrow.ArrayData, len(d.Children()))
	for i, c := range d.Children() {
		kids[i] = detached(c)
		defer kids[i].Release()
	}
	return array.NewData(d.DataType(), d.Len(), d.Buffers(), kids, nulls, d.Offset())
}

// holdsNull reports whether dt is or holds the null type, at any depth.
func holdsNull(dt arrow.DataType) bool {
	if dt.ID() == arrow.NULL {
		return true
	}
	if n, ok := dt.(arrow.NestedType); ok {
		for _, f := range n.Fields() {
			if holdsNull(f.Type) {
				return true
			}
		}
	}
	if d, ok := dt.(*arrow.DictionaryType); ok {
		return holdsNull(d.ValueType)
	}
	return false
}

func release(as []arrow.Array) {
	for _, a := range as {
		if a != nil {
			a.Release()
		}
	}
}
