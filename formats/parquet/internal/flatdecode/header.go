package flatdecode

import (
	"errors"
	"fmt"
)

// Page types, numbered as in parquet.thrift.
const (
	pageData       = 0
	pageIndex      = 1
	pageDictionary = 2
	pageDataV2     = 3
)

// Encodings, numbered as in parquet.thrift.
const (
	encPlain             = 0
	encPlainDictionary   = 2
	encRLE               = 3
	encBitPacked         = 4
	encDeltaBinaryPacked = 5
	encDeltaLength       = 6 // DELTA_LENGTH_BYTE_ARRAY
	encDeltaByteArray    = 7
	encRLEDictionary     = 8
	encByteStreamSplit   = 9
)

// pageHeader is what decoding needs of a PageHeader.
type pageHeader struct {
	typ, uncompressed, compressed int64
	size                          int // the header's own bytes

	hasData, hasDict, hasV2 bool
	values                  int64
	rows, nulls             int64 // DATA_PAGE_V2's
	encoding                int64
	defEnc, repEnc          int64 // DATA_PAGE's level encodings
	defLen, repLen          int64 // DATA_PAGE_V2's level lengths
	compressedV2            bool  // DATA_PAGE_V2's is_compressed (default true)
}

var errShort = errors.New("page header ends inside a value")

// compact reads Thrift's compact protocol, only as far as page headers
// need: integers, booleans, and skipping whatever else a writer put there.
type compact struct {
	b   []byte
	pos int
}

func (c *compact) byte() (byte, error) {
	if c.pos >= len(c.b) {
		return 0, errShort
	}
	v := c.b[c.pos]
	c.pos++
	return v, nil
}

func (c *compact) uvarint() (uint64, error) {
	var v uint64
	for shift := 0; shift < 64; shift += 7 {
		b, err := c.byte()
		if err != nil {
			return 0, err
		}
		v |= uint64(b&0x7f) << shift
		if b < 0x80 {
			return v, nil
		}
	}
	return 0, errors.New("varint longer than 64 bits")
}

func (c *compact) varint() (int64, error) {
	v, err := c.uvarint()
	return int64(v>>1) ^ -int64(v&1), err
}

func (c *compact) advance(n uint64) error {
	if n > uint64(len(c.b)-c.pos) {
		return errShort
	}
	c.pos += int(n)
	return nil
}

// Thrift compact type codes.
const (
	tStop, tTrue, tFalse, tByte, tI16, tI32, tI64, tDouble, tBinary, tList, tSet, tMap, tStruct, tUUID = 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13
)

const maxDepth = 32

// fields calls field for each field of a struct until its stop byte; field
// consumes the value.
func (c *compact) fields(depth int, field func(id int16, typ byte) error) error {
	if depth > maxDepth {
		return errors.New("structs nest too deep")
	}
	var id int16
	for {
		h, err := c.byte()
		if err != nil {
			return err
		}
		typ := h & 0x0f
		if typ == tStop {
			return nil
		}
		if d := int16(h >> 4); d != 0 {
			id += d
		} else {
			v, err := c.varint()
			if err != nil {
				return err
			}
			id = int16(v)
		}
		if err := field(id, typ); err != nil {
			return err
		}
	}
}

func (c *compact) skip(typ byte, depth int) error {
	if depth > maxDepth {
		return errors.New("values nest too deep")
	}
	switch typ {
	case tTrue, tFalse:
		return nil
	case tByte:
		return c.advance(1)
	case tI16, tI32, tI64:
		_, err := c.uvarint()
		return err
	case tDouble:
		return c.advance(8)
	case tUUID:
		return c.advance(16)
	case tBinary:
		n, err := c.uvarint()
		if err != nil {
			return err
		}
		return c.advance(n)
	case tList, tSet:
		h, err := c.byte()
		if err != nil {
			return err
		}
		n, elem := uint64(h>>4), h&0x0f
		if n == 15 {
			if n, err = c.uvarint(); err != nil {
				return err
			}
		}
		if n > uint64(len(c.b)-c.pos) {
			return errShort
		}
		for range n {
			if err := c.skipElem(elem, depth+1); err != nil {
				return err
			}
		}
		return nil
	case tMap:
		n, err := c.uvarint()
		if err != nil || n == 0 {
			return err
		}
		if n > uint64(len(c.b)-c.pos) {
			return errShort
		}
		kv, err := c.byte()
		if err != nil {
			return err
		}
		for range n {
			if err := c.skipElem(kv>>4, depth+1); err != nil {
				return err
			}
			if err := c.skipElem(kv&0x0f, depth+1); err != nil {
				return err
			}
		}
		return nil
	case tStruct:
		return c.fields(depth+1, func(_ int16, t byte) error { return c.skip(t, depth+1) })
	}
	return fmt.Errorf("unknown thrift type %d", typ)
}

// skipElem skips a container element: its booleans take a byte each.
func (c *compact) skipElem(typ byte, depth int) error {
	if typ == tTrue || typ == tFalse {
		return c.advance(1)
	}
	return c.skip(typ, depth)
}

// parseHeader reads the page header at the start of b.
func parseHeader(b []byte) (pageHeader, error) {
	h := pageHeader{typ: -1, uncompressed: -1, compressed: -1, encoding: -1, defEnc: -1, repEnc: -1, compressedV2: true}
	c := compact{b: b}
	var sub int16
	subField := func(id int16, typ byte) error {
		if sub == 8 && id == 7 && (typ == tTrue || typ == tFalse) {
			h.compressedV2 = typ == tTrue
			return nil
		}
		var dst *int64
		switch {
		case typ != tI32:
		case id == 1:
			dst = &h.values
		case sub == 5 && id == 2, sub == 7 && id == 2, sub == 8 && id == 4:
			dst = &h.encoding
		case sub == 5 && id == 3:
			dst = &h.defEnc
		case sub == 5 && id == 4:
			dst = &h.repEnc
		case sub == 8 && id == 2:
			dst = &h.nulls
		case sub == 8 && id == 3:
			dst = &h.rows
		case sub == 8 && id == 5:
			dst = &h.defLen
		case sub == 8 && id == 6:
			dst = &h.repLen
		}
		if dst == nil {
			return c.skip(typ, 2)
		}
		v, err := c.varint()
		*dst = v
		return err
	}
	err := c.fields(0, func(id int16, typ byte) error {
		var dst *int64
		switch {
		case id == 1 && typ == tI32:
			dst = &h.typ
		case id == 2 && typ == tI32:
			dst = &h.uncompressed
		case id == 3 && typ == tI32:
			dst = &h.compressed
		case (id == 5 || id == 7 || id == 8) && typ == tStruct:
			if (id == 5 && h.hasData) || (id == 7 && h.hasDict) || (id == 8 && h.hasV2) {
				return errors.New("a sub-header given twice")
			}
			h.hasData, h.hasDict, h.hasV2 = h.hasData || id == 5, h.hasDict || id == 7, h.hasV2 || id == 8
			sub = id
			return c.fields(1, subField)
		default:
			return c.skip(typ, 1)
		}
		v, err := c.varint()
		*dst = v
		return err
	})
	h.size = c.pos
	return h, err
}
