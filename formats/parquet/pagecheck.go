package parquet

import (
	"errors"
	"fmt"

	"github.com/apache/arrow-go/v18/parquet"
	pqschema "github.com/apache/arrow-go/v18/parquet/schema"

	"github.com/sluicedata/sluice/formats/parquet/internal/thrift"
)

// arrow-go trusts the page headers of a column chunk: a DATA_PAGE header
// without its data_page_header is a nil dereference, a dictionary page in a
// BOOLEAN column or an encoding its type has no decoder for is a panic, and
// so is a dictionary-encoded page met before the dictionary when the footer
// puts the dictionary after the data. A panic says nothing a user can act
// on, so the headers of the pages arrow-go is about to read are checked
// first (a few dozen bytes a page, against pages of a megabyte), and a bad
// one is reported by its byte offset and what is wrong with it.

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

// checkHeader reports what is wrong with a page of column c whose header
// is h, with room bytes of the chunk after its header, or nil.
func checkHeader(h *thrift.PageHeader, c chunkCheck, room int64) error {
	typ := c.col.PhysicalType()
	if h.Compressed < 0 || h.Uncompressed < 0 {
		return fmt.Errorf("a negative page size (%d compressed, %d uncompressed)", h.Compressed, h.Uncompressed)
	}
	if h.Compressed > room {
		return fmt.Errorf("its %d bytes run %d bytes past the end of the column chunk", h.Compressed, h.Compressed-room)
	}
	switch h.Type {
	case thrift.PageDictionary:
		if !h.HasDict {
			return fmt.Errorf("a dictionary page without its dictionary page header")
		}
		if typ == parquet.Types.Boolean {
			return fmt.Errorf("a dictionary of BOOLEAN values, which the decoder does not read")
		}
		if h.Encoding != int64(parquet.Encodings.Plain) && h.Encoding != int64(parquet.Encodings.PlainDict) {
			return fmt.Errorf("a dictionary in %s; dictionaries are PLAIN", encodingName(h.Encoding))
		}
		if h.Values < 0 {
			return fmt.Errorf("a dictionary of %d values", h.Values)
		}
		if h.Values > h.Uncompressed*8/int64(max(c.valueBits, 1)) {
			return fmt.Errorf("a dictionary of %d values in %d bytes", h.Values, h.Uncompressed)
		}
		return nil
	case thrift.PageData:
		if !h.HasData {
			return fmt.Errorf("a data page without its data page header")
		}
		if h.Values < 0 {
			return fmt.Errorf("a data page of %d values", h.Values)
		}
		for _, l := range []struct {
			name     string
			enc      int64
			maxLevel int16
		}{{"repetition", h.RepEnc, c.col.MaxRepetitionLevel()}, {"definition", h.DefEnc, c.col.MaxDefinitionLevel()}} {
			if l.maxLevel > 0 && l.enc < 0 {
				return fmt.Errorf("a data page header without its %s level encoding", l.name)
			}
			if l.maxLevel > 0 && l.enc != int64(parquet.Encodings.RLE) && l.enc != int64(parquet.Encodings.BitPacked) {
				return fmt.Errorf("%s levels in %s, which is not a level encoding", l.name, encodingName(l.enc))
			}
		}
	case thrift.PageDataV2:
		if !h.HasV2 {
			return fmt.Errorf("a data page without its data page header")
		}
		if h.Values < 0 || h.Rows < 0 {
			return fmt.Errorf("a data page of %d values in %d rows", h.Values, h.Rows)
		}
		if h.DefLen < 0 || h.RepLen < 0 || h.DefLen+h.RepLen > min(h.Compressed, h.Uncompressed) {
			return fmt.Errorf("levels of %d+%d bytes in a page of %d", h.RepLen, h.DefLen, min(h.Compressed, h.Uncompressed))
		}
	default:
		return nil // arrow-go skips pages it does not know, and so do the checks
	}
	if h.Encoding < 0 {
		return fmt.Errorf("a data page header without its encoding")
	}
	if !decodes(typ, h.Encoding) {
		return fmt.Errorf("%s values in %s, which is not an encoding for them", typ, encodingName(h.Encoding))
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
		h, err := thrift.ParsePageHeader(chunk[at:])
		if errors.Is(err, thrift.ErrShort) {
			return nil // cut short: arrow-go reports the pages missing
		}
		if err != nil {
			return pageError(c, off+int64(at), fmt.Errorf("its header does not parse: %w", err))
		}
		if err := checkHeader(&h, c, int64(len(chunk)-at-h.Size)); err != nil {
			return pageError(c, off+int64(at), err)
		}
		switch h.Type {
		case thrift.PageDictionary:
			dict = true
		case thrift.PageData, thrift.PageDataV2:
			if dictEncoded(h.Encoding) && !dict {
				return pageError(c, off+int64(at), fmt.Errorf("dictionary-encoded values before the chunk's dictionary page"))
			}
			if h.Type == thrift.PageData {
				seen += h.Values
			} else {
				seen += h.Rows
			}
		}
		at += h.Size + int(h.Compressed)
	}
	return nil
}

// checkFirstPage checks the page that starts a column chunk of which only
// some pages were fetched (the others are zeros, which arrow-go never
// reads): the dictionary page, if the chunk starts with one.
func checkFirstPage(chunk []byte, off int64, c chunkCheck) error {
	h, err := thrift.ParsePageHeader(chunk)
	if err != nil || h.Type != thrift.PageDictionary {
		return nil // a data page: checkPages checks the fetched ones
	}
	if err := checkHeader(&h, c, int64(len(chunk)-h.Size)); err != nil {
		return pageError(c, off, err)
	}
	return nil
}

func pageError(c chunkCheck, at int64, err error) error {
	return fmt.Errorf("column %q: corrupt page at byte %d: %w", c.col.ColumnPath().String(), at, err)
}
