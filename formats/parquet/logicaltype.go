package parquet

import "encoding/binary"

// knownLogicalType reports whether arrow-go's schema reader knows the
// LogicalType union member with this field id: 1-8 and 10-18 (STRING to
// GEOGRAPHY), each a struct.
func knownLogicalType(id int16, typ byte) bool {
	return typ == tStruct && (id >= 1 && id <= 8 || id >= 10 && id <= 18)
}

// dropUnknownLogicalTypes returns footer without the logical types of
// schema elements that arrow-go does not know, so that those columns read as
// their physical (or converted) type, as the Parquet spec asks of a reader
// meeting a logical type newer than itself. arrow-go instead panics ("invalid
// logical type") on the whole file (parquet-testing's
// unknown-logical-type.parquet). footer has passed checkFooter; it is
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
	s := thriftScanner{b: footer}
	err := s.structFields(0, func(id int16, typ byte) error {
		if id != 2 || typ != tList { // FileMetaData.schema
			return s.skip(typ, 1)
		}
		n, elem, err := s.listHeader()
		if err != nil || elem != tStruct {
			return errThriftShort // not what checkFooter let through: leave the footer alone
		}
		for range n {
			start := s.pos
			var fields []field
			drop := false
			err := s.structFields(1, func(id int16, typ byte) error {
				f := field{id: id, typ: typ, value: s.pos}
				if id == 10 && typ == tStruct { // SchemaElement.logicalType
					known := false
					err := s.structFields(2, func(id int16, typ byte) error {
						known = known || knownLogicalType(id, typ)
						return s.skip(typ, 3)
					})
					if err != nil {
						return err
					}
					f.drop = !known
					drop = drop || f.drop
				} else if err := s.skip(typ, 2); err != nil {
					return err
				}
				f.end = s.pos
				fields = append(fields, f)
				return nil
			})
			if err != nil {
				return err
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
			out = append(out, tStop)
			copied = s.pos
		}
		return nil
	})
	if err != nil || out == nil {
		return footer
	}
	return append(out, footer[copied:]...)
}
