package parquet

import (
	"errors"
	"fmt"

	"github.com/apache/arrow-go/v18/parquet"
	pqschema "github.com/apache/arrow-go/v18/parquet/schema"
)

// arrow-go trusts the page headers of a column chunk: a DATA_PAGE header
// without its data_page_header is a nil dereference, a dictionary page in a
// BOOLEAN column or an encoding its type has no decoder for is a panic, and
// so is a dictionary-encoded page met before the dictionary when the footer
// puts the dictionary after the data. A panic says nothing a user can act
// on, so the headers of the pages arrow-go is about to read are checked
// first (a few dozen bytes a page, against pages of a megabyte), and a bad
// one is reported by its byte offset and what is wrong with it.

// Page types and encodings, numbered as in parquet.thrift.
const (
	pageData       = 0
	pageDictionary = 2
	pageDataV2     = 3
)

// chunkCheck is what the page checks know of a column chunk.
type chunkCheck struct {
	// col is the column as arrow-go decodes it (see readAs).
	col *pqschema.Column
	// values is the chunk's num_values: arrow-go reads pages until their
	// counts reach it.
	values int64
	// valueBits is the fewest bits a PLAIN-encoded value takes.
	valueBits int
}

// pageHeader is what the checks read of a PageHeader.
type pageHeader struct {
	typ, uncompressed, compressed int64
	size                          int // the header's own bytes

	hasData, hasDict, hasV2 bool
	values, rows            int64 // rows: DATA_PAGE_V2's num_rows
	encoding                int64
	defEnc, repEnc          int64 // DATA_PAGE's level encodings
	defLen, repLen          int64 // DATA_PAGE_V2's level lengths
}

// parsePageHeader reads the page header at the start of b.
func parsePageHeader(b []byte) (pageHeader, error) {
	h := pageHeader{typ: -1, uncompressed: -1, compressed: -1, encoding: -1, defEnc: -1, repEnc: -1}
	s := thriftScanner{b: b}
	var sub int16 // the sub-header being read: 5, 7 or 8
	subField := func(id int16, typ byte) error {
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
		case sub == 8 && id == 3:
			dst = &h.rows
		case sub == 8 && id == 5:
			dst = &h.defLen
		case sub == 8 && id == 6:
			dst = &h.repLen
		}
		if dst == nil {
			return s.skip(typ, 2)
		}
		v, err := s.varint()
		*dst = zigzag(v)
		return err
	}
	err := s.structFields(0, func(id int16, typ byte) error {
		var dst *int64
		switch {
		case id == 1 && typ == tI32:
			dst = &h.typ
		case id == 2 && typ == tI32:
			dst = &h.uncompressed
		case id == 3 && typ == tI32:
			dst = &h.compressed
		case (id == 5 || id == 7 || id == 8) && typ == tStruct:
			h.hasData, h.hasDict, h.hasV2 = h.hasData || id == 5, h.hasDict || id == 7, h.hasV2 || id == 8
			sub = id
			return s.structFields(1, subField)
		default:
			return s.skip(typ, 1)
		}
		v, err := s.varint()
		*dst = zigzag(v)
		return err
	})
	h.size = s.pos
	return h, err
}

// check reports what is wrong with a page of column c whose header is h,
// with room bytes of the chunk after its header, or nil.
func (h pageHeader) check(c chunkCheck, room int64) error {
	typ := c.col.PhysicalType()
	if h.compressed < 0 || h.uncompressed < 0 {
		return fmt.Errorf("a negative page size (%d compressed, %d uncompressed)", h.compressed, h.uncompressed)
	}
	if h.compressed > room {
		return fmt.Errorf("its %d bytes run %d bytes past the end of the column chunk", h.compressed, h.compressed-room)
	}
	switch h.typ {
	case pageDictionary:
		if !h.hasDict {
			return fmt.Errorf("a dictionary page without its dictionary page header")
		}
		if typ == parquet.Types.Boolean {
			return fmt.Errorf("a dictionary of BOOLEAN values, which the decoder does not read")
		}
		if h.encoding != int64(parquet.Encodings.Plain) && h.encoding != int64(parquet.Encodings.PlainDict) {
			return fmt.Errorf("a dictionary in %s; dictionaries are PLAIN", encodingName(h.encoding))
		}
		if h.values < 0 {
			return fmt.Errorf("a dictionary of %d values", h.values)
		}
		if h.values > h.uncompressed*8/int64(max(c.valueBits, 1)) {
			return fmt.Errorf("a dictionary of %d values in %d bytes", h.values, h.uncompressed)
		}
		return nil
	case pageData:
		if !h.hasData {
			return fmt.Errorf("a data page without its data page header")
		}
		if h.values < 0 {
			return fmt.Errorf("a data page of %d values", h.values)
		}
		for _, l := range []struct {
			name     string
			enc      int64
			maxLevel int16
		}{{"repetition", h.repEnc, c.col.MaxRepetitionLevel()}, {"definition", h.defEnc, c.col.MaxDefinitionLevel()}} {
			if l.maxLevel > 0 && l.enc < 0 {
				return fmt.Errorf("a data page header without its %s level encoding", l.name)
			}
			if l.maxLevel > 0 && l.enc != int64(parquet.Encodings.RLE) && l.enc != int64(parquet.Encodings.BitPacked) {
				return fmt.Errorf("%s levels in %s, which is not a level encoding", l.name, encodingName(l.enc))
			}
		}
	case pageDataV2:
		if !h.hasV2 {
			return fmt.Errorf("a data page without its data page header")
		}
		if h.values < 0 || h.rows < 0 {
			return fmt.Errorf("a data page of %d values in %d rows", h.values, h.rows)
		}
		if h.defLen < 0 || h.repLen < 0 || h.defLen+h.repLen > min(h.compressed, h.uncompressed) {
			return fmt.Errorf("levels of %d+%d bytes in a page of %d", h.repLen, h.defLen, min(h.compressed, h.uncompressed))
		}
	default:
		return nil // arrow-go skips pages it does not know, and so do the checks
	}
	if h.encoding < 0 {
		return fmt.Errorf("a data page header without its encoding")
	}
	if !decodes(typ, h.encoding) {
		return fmt.Errorf("%s values in %s, which is not an encoding for them", typ, encodingName(h.encoding))
	}
	return nil
}

// decodes reports whether arrow-go has a decoder for values of type typ in
// encoding enc (the Parquet format allows no others but dictionaries of
// BOOLEAN values).
func decodes(typ parquet.Type, enc int64) bool {
	switch parquet.Encoding(enc) {
	case parquet.Encodings.Plain:
		return true
	case parquet.Encodings.PlainDict, parquet.Encodings.RLEDict:
		return typ != parquet.Types.Boolean
	case parquet.Encodings.RLE:
		return typ == parquet.Types.Boolean
	case parquet.Encodings.DeltaBinaryPacked:
		return typ == parquet.Types.Int32 || typ == parquet.Types.Int64
	case parquet.Encodings.DeltaLengthByteArray:
		return typ == parquet.Types.ByteArray
	case parquet.Encodings.DeltaByteArray:
		return typ == parquet.Types.ByteArray || typ == parquet.Types.FixedLenByteArray
	case parquet.Encodings.ByteStreamSplit:
		switch typ {
		case parquet.Types.Int32, parquet.Types.Int64, parquet.Types.Float, parquet.Types.Double, parquet.Types.FixedLenByteArray:
			return true
		}
	}
	return false
}

func encodingName(enc int64) string {
	if enc < 0 || enc > int64(parquet.Encodings.ByteStreamSplit) || enc == 1 {
		return fmt.Sprintf("encoding %d", enc)
	}
	return parquet.Encoding(enc).String()
}

func dictEncoded(enc int64) bool {
	return enc == int64(parquet.Encodings.PlainDict) || enc == int64(parquet.Encodings.RLEDict)
}

// checkChunk checks the headers of the pages arrow-go reads of a whole
// column chunk at file offset off: the pages up to the chunk's value count,
// in order.
func checkChunk(chunk []byte, off int64, c chunkCheck) error {
	var seen int64
	dict := false
	for at := 0; seen < c.values && at < len(chunk); {
		h, err := parsePageHeader(chunk[at:])
		if errors.Is(err, errThriftShort) {
			return nil // cut short: arrow-go reports the pages missing
		}
		if err != nil {
			return pageError(c, off+int64(at), fmt.Errorf("its header does not parse: %w", err))
		}
		if err := h.check(c, int64(len(chunk)-at-h.size)); err != nil {
			return pageError(c, off+int64(at), err)
		}
		switch h.typ {
		case pageDictionary:
			dict = true
		case pageData, pageDataV2:
			if dictEncoded(h.encoding) && !dict {
				return pageError(c, off+int64(at), fmt.Errorf("dictionary-encoded values before the chunk's dictionary page"))
			}
			if h.typ == pageData {
				seen += h.values
			} else {
				seen += h.rows
			}
		}
		at += h.size + int(h.compressed)
	}
	return nil
}

// checkFirstPage checks the page that starts a column chunk of which only
// some pages were fetched (the others are zeros, which arrow-go never
// reads): the dictionary page, if the chunk starts with one.
func checkFirstPage(chunk []byte, off int64, c chunkCheck) error {
	h, err := parsePageHeader(chunk)
	if err != nil || h.typ != pageDictionary {
		return nil // a data page: checkPages checks the fetched ones
	}
	if err := h.check(c, int64(len(chunk)-h.size)); err != nil {
		return pageError(c, off, err)
	}
	return nil
}

func pageError(c chunkCheck, at int64, err error) error {
	return fmt.Errorf("column %q: corrupt page at byte %d: %w", c.col.ColumnPath().String(), at, err)
}
