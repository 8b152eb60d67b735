package parquet

import (
	"fmt"

	"github.com/sluicedata/sluice/formats/parquet/internal/thrift"
)

// checkFooter walks a Parquet footer (a FileMetaData struct in Thrift's
// compact protocol) before arrow-go decodes it, because the decoder trusts
// the counts it reads:
//   - Thrift allocates a list for as many elements as its header claims (up
//     to 100 M), so a few bytes can ask for most of a gigabyte: every
//     container here must fit in the bytes that remain;
//   - arrow-go sizes a schema group by its num_children before checking it
//     (2^31 children is a fatal out-of-memory, not a panic) and builds the
//     schema tree recursively (a deep enough chain overflows the stack, also
//     fatal): num_children must be within the schema's element count and the
//     tree no deeper than maxSchemaDepth.
//
// Fields and types it does not know are skipped, so newer footers pass.
func checkFooter(b []byte) error {
	var children []int64 // num_children of each schema element
	err := schemaLists(b, func(s *thrift.Reader, n int64, elem byte, _ int) error {
		if elem != thrift.Struct {
			return s.SkipElems(elem, n, 1)
		}
		children = children[:0] // a repeated field replaces the earlier one
		for range n {
			var nc int64
			err := s.Fields(1, func(id int16, typ byte) error {
				if id == 5 && typ == thrift.I32 { // SchemaElement.num_children
					var err error
					nc, err = s.Varint()
					return err
				}
				return s.Skip(typ, 2)
			})
			if err != nil {
				return err
			}
			children = append(children, nc)
		}
		return nil
	})
	if err != nil {
		return err
	}
	return checkSchemaTree(children)
}

// schemaLists reads footer, a FileMetaData, and calls list at each of its
// schema fields (list<SchemaElement>; a footer may give the field more
// than once, the last one counting) with the list's length, the type of
// its elements and the offset of its header, and s at its first element:
// list must consume the elements. The other fields are skipped.
func schemaLists(footer []byte, list func(s *thrift.Reader, n int64, elem byte, header int) error) error {
	s := thrift.NewReader(footer)
	return s.Fields(0, func(id int16, typ byte) error {
		if id != 2 || typ != thrift.List { // FileMetaData.schema
			return s.Skip(typ, 1)
		}
		header := s.Pos()
		n, elem, err := s.ListHeader()
		if err != nil {
			return err
		}
		return list(&s, n, elem, header)
	})
}

// maxSchemaDepth bounds the nesting of groups in a schema: real schemas nest
// a handful of levels; arrow-go's recursion must stay far from the stack
// limit.
const maxSchemaDepth = 128

// checkSchemaTree checks that the flattened schema (each element's
// num_children, in depth-first order) is a tree of bounded depth: the
// children every open group still expects must be elements that follow, so
// that what arrow-go allocates for groups is bounded by the element count.
func checkSchemaTree(children []int64) error {
	var (
		open    []int64 // children still expected by each enclosing group
		pending int64   // their sum
	)
	for i, nc := range children {
		if i > 0 {
			if len(open) == 0 {
				break // elements after the tree: arrow-go ignores them
			}
			open[len(open)-1]--
			pending--
		}
		if nc < 0 {
			return fmt.Errorf("schema element %d has %d children", i, nc)
		}
		if nc > 0 {
			pending += nc
			if after := int64(len(children) - i - 1); pending > after {
				return fmt.Errorf("schema element %d claims %d children, but only %d elements follow for all open groups", i, nc, after)
			}
			if len(open) == maxSchemaDepth {
				return fmt.Errorf("schema nests deeper than %d levels", maxSchemaDepth)
			}
			open = append(open, nc)
		}
		for len(open) > 0 && open[len(open)-1] == 0 {
			open = open[:len(open)-1]
		}
	}
	return nil
}
