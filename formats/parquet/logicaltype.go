package parquet

import (
	"encoding/binary"
	"fmt"

	"github.com/apache/arrow-go/v18/parquet"
	pqschema "github.com/apache/arrow-go/v18/parquet/schema"

	"github.com/sluicedata/sluice/formats/parquet/internal/thrift"
)

// knownLogicalType reports whether arrow-go's schema reader knows the
// LogicalType union member with this field id: 1-8 and 10-18 (STRING to
// GEOGRAPHY), each a struct.
func knownLogicalType(id int16, typ byte) bool {
	return typ == thrift.Struct && (id >= 1 && id <= 8 || id >= 10 && id <= 18)
}

// convertedMapKeyValue is the legacy MAP_KEY_VALUE converted type.
const convertedMapKeyValue = 2

// dropUnknownLogicalTypes returns footer without the logical types of
// schema elements that arrow-go does not know, so that those columns read as
// their physical (or converted) type, as the Parquet spec asks of a reader
// meeting a logical type newer than itself. arrow-go instead panics ("invalid
// logical type") on the whole file (parquet-testing's
// unknown-logical-type.parquet). It also drops the UNKNOWN logical type
// that parquet-mr (Hive, older Spark) writes beside the legacy MAP_KEY_VALUE
// converted type on a map's repeated key_value group: arrow-go refuses the
// file ("logical type Null cannot be applied to group node"), while the
// converted type alone under a MAP group reads as the map DuckDB gives.
// footer has passed checkFooter; it is
// returned as is when nothing is dropped, and on any surprise.
func dropUnknownLogicalTypes(footer []byte) []byte {
	type field struct {
		id         int16
		typ        byte
		value, end int // where the value starts and ends
		drop       bool
	}
	var out []byte
	copied := 0 // footer[:copied] is in out, or out is nil
	err := schemaLists(footer, func(s *thrift.Reader, n int64, elem byte, _ int) error {
		if elem != thrift.Struct {
			return thrift.ErrShort // not what checkFooter let through: leave the footer alone
		}
		for range n {
			start := s.Pos()
			var fields []field
			drop := false
			mapKeyValue, unknownAt := false, -1
			err := s.Fields(1, func(id int16, typ byte) error {
				f := field{id: id, typ: typ, value: s.Pos()}
				switch {
				case id == 10 && typ == thrift.Struct: // SchemaElement.logicalType
					known, null := false, false
					err := s.Fields(2, func(id int16, typ byte) error {
						known = known || knownLogicalType(id, typ)
						null = null || id == 11 && typ == thrift.Struct // UNKNOWN
						return s.Skip(typ, 3)
					})
					if err != nil {
						return err
					}
					f.drop = !known
					drop = drop || f.drop
					if null {
						unknownAt = len(fields)
					}
				case id == 6 && typ == thrift.I32: // SchemaElement.converted_type
					v, err := s.Varint()
					if err != nil {
						return err
					}
					mapKeyValue = v == convertedMapKeyValue
				default:
					if err := s.Skip(typ, 2); err != nil {
						return err
					}
				}
				f.end = s.Pos()
				fields = append(fields, f)
				return nil
			})
			if err != nil {
				return err
			}
			if mapKeyValue && unknownAt >= 0 {
				fields[unknownAt].drop, drop = true, true
			}
			if !drop {
				continue
			}
			// Write the element again without the dropped field: the field
			// ids of compact Thrift are deltas, so every header is written
			// anew.
			out = append(out, footer[copied:start]...)
			var last int16
			for _, f := range fields {
				if f.drop {
					continue
				}
				if d := f.id - last; d > 0 && d <= 15 {
					out = append(out, byte(d)<<4|f.typ)
				} else {
					out = append(out, f.typ)
					id := int64(f.id)
					out = binary.AppendUvarint(out, uint64(id<<1^id>>63)) // zigzag
				}
				out = append(out, footer[f.value:f.end]...)
				last = f.id
			}
			out = append(out, thrift.Stop)
			copied = s.Pos()
		}
		return nil
	})
	if err != nil || out == nil {
		return footer
	}
	return append(out, footer[copied:]...)
}

// checkMapKeyValue refuses a repeated group annotated MAP_KEY_VALUE whose
// parent is not a MAP: arrow-go takes the annotation for MAP and fails on
// the repeated group ("MAP group must have exactly 1 child"), and there is
// no map for it to stand in (DuckDB reads such a group as a map of its own,
// inside the parent's struct). Under a MAP group the annotation is the
// legacy mark of the key_value group, and arrow-go reads the map.
func checkMapKeyValue(n pqschema.Node, parentMap bool, path string) error {
	g, ok := n.(*pqschema.GroupNode)
	if !ok {
		return nil
	}
	if g.ConvertedType() == pqschema.ConvertedTypes.MapKeyValue && g.RepetitionType() == parquet.Repetitions.Repeated && !parentMap {
		return fmt.Errorf("column %q: the repeated group %q is annotated MAP_KEY_VALUE outside a MAP group, a legacy map layout that arrow-go cannot read", path, g.Name())
	}
	_, isMap := g.LogicalType().(pqschema.MapLogicalType)
	for i := range g.NumFields() {
		f := g.Field(i)
		p := f.Name()
		if path != "" {
			p = path + "." + p
		}
		if err := checkMapKeyValue(f, isMap, p); err != nil {
			return err
		}
	}
	return nil
}
