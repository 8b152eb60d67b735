package parquet

import (
	"encoding/binary"
	"strconv"

	"github.com/sluicedata/sluice/formats/parquet/internal/thrift"
)

// Columns are selected, filtered and unified by name, so a file with two
// top-level columns of one name (pandas and Spark both write them) would
// leave "which id?" unanswered. The driver renames the later ones, as DuckDB
// does, so that the differential tests agree and a projection or a filter
// can name each: a name met before gets "_" and the count of its earlier
// uses appended ("id", "id" reads as "id", "id_1"), and a new name that is
// itself taken is renamed again by the same rule ("id", "id_1", "id" reads as
// "id", "id_1", "id_1_1"). The first column of a name keeps it. Unlike
// DuckDB, whose identifiers ignore case, names that differ only in case are
// different names here and are left alone. Nested fields keep their names.

// uniqueNames returns names with the later duplicates renamed as above, and
// whether any was.
func uniqueNames(names []string) ([]string, bool) {
	uses := make(map[string]int, len(names))
	out := make([]string, len(names))
	renamed := false
	for i, n := range names {
		for uses[n] > 0 {
			k := uses[n]
			uses[n]++
			n += "_" + strconv.Itoa(k)
			renamed = true
		}
		uses[n] = 1
		out[i] = n
	}
	return out, renamed
}

// schemaName is where a SchemaElement's name is in a footer.
type schemaName struct {
	name       string
	value, end int // the name's length prefix and the end of its bytes
	children   int64
}

// renameDuplicateColumns rewrites a footer that has passed checkFooter so
// that its top-level columns have unique names (see uniqueNames): the
// schema's SchemaElement names are the only names arrow-go reads (a column
// chunk's path_in_schema only matters to encryption, which is refused), so
// everything downstream, arrow-go's decoded batches included, sees the new
// ones. Compact Thrift frames no struct by its length, so a name is changed
// by replacing its length and bytes alone. footer is returned as is when no
// name repeats, and on any surprise.
func renameDuplicateColumns(footer []byte) []byte {
	elems, ok := schemaNames(footer)
	if !ok || len(elems) == 0 {
		return footer
	}
	// The root's children are the top-level columns; each is followed by
	// its subtree, in depth-first order.
	var top []int
	next := 1
	for range elems[0].children {
		if next >= len(elems) {
			return footer
		}
		top = append(top, next)
		end, ok := subtreeEnd(elems, next)
		if !ok {
			return footer
		}
		next = end
	}
	names := make([]string, len(top))
	for i, e := range top {
		names[i] = elems[e].name
	}
	unique, renamed := uniqueNames(names)
	if !renamed {
		return footer
	}
	out := make([]byte, 0, len(footer)+8*len(top))
	copied := 0
	for i, e := range top {
		if unique[i] == names[i] {
			continue
		}
		out = append(out, footer[copied:elems[e].value]...)
		out = binary.AppendUvarint(out, uint64(len(unique[i])))
		out = append(out, unique[i]...)
		copied = elems[e].end
	}
	return append(out, footer[copied:]...)
}

// subtreeEnd is the index past the subtree of elems[i], or false where the
// counts run past the list.
func subtreeEnd(elems []schemaName, i int) (int, bool) {
	pending := int64(1) // elements still to visit
	for ; pending > 0; i++ {
		if i >= len(elems) || elems[i].children < 0 {
			return 0, false
		}
		pending += elems[i].children - 1
	}
	return i, true
}

// schemaNames lists the SchemaElements of footer's FileMetaData.schema with
// where their names are; false where the footer is not as expected (a
// name that is not a string, a missing one).
func schemaNames(footer []byte) ([]schemaName, bool) {
	var elems []schemaName
	err := schemaLists(footer, func(s *thrift.Reader, n int64, elem byte, _ int) error {
		if elem != thrift.Struct {
			return thrift.ErrShort
		}
		for range n {
			e := schemaName{value: -1}
			err := s.Fields(1, func(id int16, typ byte) error {
				switch {
				case id == 4 && typ == thrift.Binary: // SchemaElement.name
					e.value = s.Pos()
					name, err := s.Binary()
					e.name, e.end = string(name), s.Pos()
					return err
				case id == 5 && typ == thrift.I32: // SchemaElement.num_children
					var err error
					e.children, err = s.Varint()
					return err
				}
				return s.Skip(typ, 2)
			})
			if err != nil {
				return err
			}
			if e.value < 0 {
				return thrift.ErrShort
			}
			elems = append(elems, e)
		}
		return nil
	})
	return elems, err == nil
}
