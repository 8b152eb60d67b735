//go:build cgo

package main

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// exportable is b as the C data interface means it. A batch cut from a
// window slices its struct columns, and arrow-go's exporter writes such a
// struct with its offset and with children that are already sliced: a
// consumer that follows the specification (Arrow C++, pyarrow, the Python
// package) adds the parent's offset to each child's, reads the children
// at twice the offset and finds them too short. Columns holding a sliced
// struct or sparse union anywhere inside are copied into arrays of their own
// rows; every other column crosses as it is, without a copy. The caller
// releases what it gets (b itself, retained, where nothing needed a copy).
func exportable(b arrow.RecordBatch) (arrow.RecordBatch, error) {
	var cols []arrow.Array
	for i, c := range b.Columns() {
		if !holdsSlicedStruct(c) {
			continue
		}
		whole, err := array.Concatenate([]arrow.Array{c}, memory.DefaultAllocator)
		if err != nil {
			return nil, fmt.Errorf("column %q: %w", b.ColumnName(i), err)
		}
		// The batch made below holds its own reference.
		defer whole.Release()
		if cols == nil {
			cols = append([]arrow.Array(nil), b.Columns()...)
		}
		cols[i] = whole
	}
	if cols == nil {
		b.Retain()
		return b, nil
	}
	return array.NewRecordBatch(b.Schema(), cols, b.NumRows()), nil
}

// holdsSlicedStruct says whether a, or an array nested in it, is a struct
// or sparse union with an offset: what arrow-go exports with the offset
// applied twice. (No reader here makes sparse unions; arrow-go cannot copy
// one, so such a column fails with an error that names it.)
func holdsSlicedStruct(a arrow.Array) bool {
	switch a := a.(type) {
	case *array.Struct:
		if a.Data().Offset() != 0 {
			return true
		}
		for i := range a.NumField() {
			if holdsSlicedStruct(a.Field(i)) {
				return true
			}
		}
	case array.Union:
		// A dense union's offset is into its type ids and offsets, not its
		// children; a sparse union's children are cut as a struct's are.
		if a.Mode() == arrow.SparseMode && a.Data().Offset() != 0 {
			return true
		}
		for i := range a.NumFields() {
			if holdsSlicedStruct(a.Field(i)) {
				return true
			}
		}
	case array.ListLike:
		return holdsSlicedStruct(a.ListValues())
	case *array.Dictionary:
		return holdsSlicedStruct(a.Dictionary())
	case *array.RunEndEncoded:
		return holdsSlicedStruct(a.Values())
	}
	return false
}
