package parquet

import (
	"encoding/binary"

	"github.com/sluicedata/sluice/formats/parquet/internal/thrift"
)

// A schema may hold a group without fields (some writers keep an empty
// struct so; the spec does not forbid it). It has no values, so no column
// chunk: a writer writes chunks for the leaves only. arrow-go reads a
// SchemaElement without children as a leaf whatever its type says (none: a
// BOOLEAN), so it counts one column more than each row group has chunks
// for, and the file was refused ("2 column chunks for 3 columns"). An empty
// group is no column: the driver drops it from the footer before arrow-go
// parses it, and a group left without fields by that is dropped too. The
// file then reads as the rest of its columns.

// schemaElem is where a SchemaElement lies in a footer and what the
// dropping needs of it.
type schemaElem struct {
	start, end int  // the element's bytes
	typed      bool // it has a type: a leaf
	children   int64
	// count is where its num_children value lies ([0, 0) if it has none).
	count [2]int
}

// dropEmptyGroups rewrites a footer that has passed checkFooter without
// its schema's empty groups (see above). footer is returned as is where
// there are none, and on any surprise.
func dropEmptyGroups(footer []byte) []byte {
	elems, list, ok := schemaElems(footer)
	if !ok || len(elems) < 2 {
		return footer
	}
	// Each element's parent, from the depth-first order. A group is an
	// element with children, as arrow-go builds the tree.
	parent := make([]int, len(elems))
	var open []int // the groups whose children are still to come
	left := make([]int64, len(elems))
	for i, e := range elems {
		if i > 0 {
			if len(open) == 0 {
				return footer // elements past the tree: not a footer to touch
			}
			p := open[len(open)-1]
			parent[i] = p
			if left[p]--; left[p] == 0 {
				open = open[:len(open)-1]
			}
		}
		if e.children < 0 {
			return footer
		}
		if e.children > 0 {
			open = append(open, i)
			left[i] = e.children
		}
	}
	// Children follow their parent, so from the last element back each
	// group's children are settled before the group is looked at. An
	// element without children is empty where it has no type; a group
	// whose children all go is empty too, whatever type it claims.
	kids := make([]int64, len(elems))
	for i, e := range elems {
		kids[i] = e.children
	}
	drop := make([]bool, len(elems))
	dropped := 0
	for i := len(elems) - 1; i > 0; i-- {
		if kids[i] == 0 && (!elems[i].typed || elems[i].children > 0) {
			drop[i] = true
			dropped++
			kids[parent[i]]--
		}
	}
	if dropped == 0 {
		return footer
	}
	out := make([]byte, 0, len(footer))
	out = append(out, footer[:list[0]]...)
	n := len(elems) - dropped
	if n < 15 {
		out = append(out, byte(n)<<4|thrift.Struct)
	} else {
		out = append(out, 0xf0|thrift.Struct)
		out = binary.AppendUvarint(out, uint64(n))
	}
	for i, e := range elems {
		switch {
		case drop[i]:
		case kids[i] != e.children:
			out = append(out, footer[e.start:e.count[0]]...)
			out = binary.AppendUvarint(out, uint64(kids[i]<<1^kids[i]>>63)) // zigzag
			out = append(out, footer[e.count[1]:e.end]...)
		default:
			out = append(out, footer[e.start:e.end]...)
		}
	}
	return append(out, footer[list[1]:]...)
}

// schemaElems lists the SchemaElements of footer's FileMetaData.schema,
// with where the list's header starts and the list ends; false where the
// footer is not as expected.
func schemaElems(footer []byte) ([]schemaElem, [2]int, bool) {
	var elems []schemaElem
	var list [2]int
	err := schemaLists(footer, func(s *thrift.Reader, n int64, elem byte, header int) error {
		if elem != thrift.Struct {
			return thrift.ErrShort
		}
		list[0] = header
		elems = elems[:0] // a repeated field replaces the earlier one
		for range n {
			e := schemaElem{start: s.Pos()}
			err := s.Fields(1, func(id int16, typ byte) error {
				switch {
				case id == 1: // SchemaElement.type
					e.typed = true
				case id == 5 && typ == thrift.I32: // SchemaElement.num_children
					e.count[0] = s.Pos()
					var err error
					e.children, err = s.Varint()
					e.count[1] = s.Pos()
					return err
				}
				return s.Skip(typ, 2)
			})
			if err != nil {
				return err
			}
			e.end = s.Pos()
			elems = append(elems, e)
		}
		list[1] = s.Pos()
		return nil
	})
	return elems, list, err == nil
}
