package parquet

import (
	"errors"
	"fmt"
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
	s := thriftScanner{b: b}
	var children []int64 // num_children of each schema element
	err := s.structFields(0, func(id int16, typ byte) error {
		if id != 2 || typ != tList { // FileMetaData.schema: list<SchemaElement>
			return s.skip(typ, 1)
		}
		n, elem, err := s.listHeader()
		if err != nil {
			return err
		}
		if elem != tStruct {
			return s.skipElems(elem, n, 1)
		}
		children = children[:0] // a repeated field replaces the earlier one
		for range n {
			var nc int64
			err := s.structFields(1, func(id int16, typ byte) error {
				if id == 5 && typ == tI32 { // SchemaElement.num_children
					v, err := s.varint()
					nc = zigzag(v)
					return err
				}
				return s.skip(typ, 2)
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

// Thrift compact protocol type codes.
const (
	tStop   = 0
	tTrue   = 1
	tFalse  = 2
	tByte   = 3
	tI16    = 4
	tI32    = 5
	tI64    = 6
	tDouble = 7
	tBinary = 8
	tList   = 9
	tSet    = 10
	tMap    = 11
	tStruct = 12
	tUUID   = 13
)

// maxThriftDepth matches the recursion limit of Thrift's own skipping.
const maxThriftDepth = 64

var errThriftShort = errors.New("thrift: footer ends inside a value")

// thriftScanner validates compact-protocol Thrift without building values.
type thriftScanner struct {
	b   []byte
	pos int
}

func (s *thriftScanner) remaining() int { return len(s.b) - s.pos }

func (s *thriftScanner) byte() (byte, error) {
	if s.pos >= len(s.b) {
		return 0, errThriftShort
	}
	c := s.b[s.pos]
	s.pos++
	return c, nil
}

func (s *thriftScanner) advance(n int64) error {
	if n < 0 || n > int64(s.remaining()) {
		return errThriftShort
	}
	s.pos += int(n)
	return nil
}

// varint reads an unsigned LEB128 varint of at most 64 bits.
func (s *thriftScanner) varint() (uint64, error) {
	var v uint64
	for shift := 0; shift < 64; shift += 7 {
		c, err := s.byte()
		if err != nil {
			return 0, err
		}
		v |= uint64(c&0x7f) << shift
		if c < 0x80 {
			return v, nil
		}
	}
	return 0, errors.New("thrift: varint longer than 64 bits")
}

func zigzag(v uint64) int64 { return int64(v>>1) ^ -int64(v&1) }

// structFields calls field for each field header of a struct until its stop
// byte; field must consume the value.
func (s *thriftScanner) structFields(depth int, field func(id int16, typ byte) error) error {
	if depth > maxThriftDepth {
		return fmt.Errorf("thrift: structs nest deeper than %d", maxThriftDepth)
	}
	var id int16
	for {
		h, err := s.byte()
		if err != nil {
			return err
		}
		typ := h & 0x0f
		if typ == tStop {
			return nil
		}
		if delta := int16(h >> 4); delta != 0 {
			id += delta
		} else {
			v, err := s.varint()
			if err != nil {
				return err
			}
			id = int16(zigzag(v))
		}
		if err := field(id, typ); err != nil {
			return err
		}
	}
}

// listHeader reads a list or set header and checks that its elements, of at
// least one byte each, fit in what remains.
func (s *thriftScanner) listHeader() (n int64, elem byte, err error) {
	h, err := s.byte()
	if err != nil {
		return 0, 0, err
	}
	n, elem = int64(h>>4), h&0x0f
	if n == 15 {
		v, err := s.varint()
		if err != nil {
			return 0, 0, err
		}
		if v > uint64(s.remaining()) {
			return 0, 0, fmt.Errorf("thrift: list claims %d elements in %d bytes", v, s.remaining())
		}
		n = int64(v)
	}
	return n, elem, nil
}

func (s *thriftScanner) skipElems(elem byte, n int64, depth int) error {
	for range n {
		if err := s.skipElem(elem, depth); err != nil {
			return err
		}
	}
	return nil
}

// skipElem consumes one element of a list, set or map: unlike a struct
// field's, a container's booleans take a byte each.
func (s *thriftScanner) skipElem(typ byte, depth int) error {
	if typ == tTrue || typ == tFalse {
		return s.advance(1)
	}
	return s.skip(typ, depth)
}

// skip consumes one value of type typ.
func (s *thriftScanner) skip(typ byte, depth int) error {
	if depth > maxThriftDepth {
		return fmt.Errorf("thrift: values nest deeper than %d", maxThriftDepth)
	}
	switch typ {
	case tTrue, tFalse:
		return nil // a struct field's boolean is in its header
	case tByte:
		return s.advance(1)
	case tI16, tI32, tI64:
		_, err := s.varint()
		return err
	case tDouble:
		return s.advance(8)
	case tUUID:
		return s.advance(16)
	case tBinary:
		n, err := s.varint()
		if err != nil {
			return err
		}
		if n > uint64(s.remaining()) {
			return fmt.Errorf("thrift: binary of %d bytes in %d", n, s.remaining())
		}
		return s.advance(int64(n))
	case tList, tSet:
		n, elem, err := s.listHeader()
		if err != nil {
			return err
		}
		return s.skipElems(elem, n, depth+1)
	case tMap:
		n, err := s.varint()
		if err != nil {
			return err
		}
		if n == 0 {
			return nil
		}
		if n > uint64(s.remaining())/2 {
			return fmt.Errorf("thrift: map claims %d entries in %d bytes", n, s.remaining())
		}
		kv, err := s.byte()
		if err != nil {
			return err
		}
		for range n {
			if err := s.skipElem(kv>>4, depth+1); err != nil {
				return err
			}
			if err := s.skipElem(kv&0x0f, depth+1); err != nil {
				return err
			}
		}
		return nil
	case tStruct:
		return s.structFields(depth+1, func(_ int16, typ byte) error { return s.skip(typ, depth+1) })
	}
	return fmt.Errorf("thrift: unknown type %d", typ)
}
