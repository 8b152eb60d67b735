package parquet

import (
	"bytes"
	"encoding/binary"
	"os"
	"testing"

	"github.com/sluicedata/sluice/formats/parquet/internal/thrift"
)

// Files no writer at hand writes (an empty group, the deprecated LZ4 codec,
// FIXED_LEN_BYTE_ARRAY pages that fall back from a dictionary to
// DELTA_BYTE_ARRAY) are built here byte by byte: a schema, and one row
// group whose column chunks are the pages given. The external tests reach
// it through the exported names.

// HandElem is a SchemaElement: a group where Phys is negative (with
// Children, written even when 0; NoChildren leaves the field out), else a
// leaf of that physical type. Rep is the repetition (0 required, 1
// optional, 2 repeated), negative for none (the root).
type HandElem struct {
	Name       string
	Phys       int32
	Length     int32 // FIXED_LEN_BYTE_ARRAY's type_length
	Rep        int32
	Children   int32
	NoChildren bool
	UUID       bool // the UUID logical type
}

// HandChunk is a column chunk: its pages (header and body each, see
// HandPage), the first a dictionary page where Dict says so.
type HandChunk struct {
	Path      []string
	Phys      int32
	Codec     int32
	Values    int64
	Encodings []int32
	Dict      bool
	Pages     []HandPage
}

// HandPage is a page as stored, and the uncompressed size its header gave.
type HandPage struct {
	Bytes []byte
	Raw   int // uncompressed bytes of the body
}

// Encodings and codecs, as parquet.thrift numbers them.
const (
	HandPlain        = 0
	HandRLE          = 3
	HandDeltaBytes   = 7
	HandRLEDict      = 8
	HandUncompressed = 0
	HandLZ4          = 5
)

// HandDataPageV1 is a DATA_PAGE of values values (rows, nulls included)
// in encoding enc, levels in RLE, whose body (levels and values, as
// stored) decompresses to raw bytes.
func HandDataPageV1(values, enc int32, raw int, body []byte) HandPage {
	return handPage(thrift.PageData, 5, raw, body, values, enc, HandRLE, HandRLE)
}

// HandDataPageV2 is a DATA_PAGE_V2 of rows rows, nulls of them null, in
// encoding enc: body is the definition levels (defLen bytes, never
// compressed) and then the values, compressed to what decompresses to
// raw bytes in all.
func HandDataPageV2(rows, nulls, enc int32, defLen, raw int, body []byte) HandPage {
	return handPage(thrift.PageDataV2, 8, raw, body, rows, nulls, rows, enc, int32(defLen), 0)
}

// HandDictionaryPage is a PLAIN dictionary page of values values.
func HandDictionaryPage(values int32, raw int, body []byte) HandPage {
	return handPage(thrift.PageDictionary, 7, raw, body, values, HandPlain)
}

// handPage is a page of type typ, its header's sizes those of body and
// raw, its sub-header (field sub) the i32 fields 1, 2, ... of fields.
func handPage(typ int32, sub int16, raw int, body []byte, fields ...int32) HandPage {
	var h compact
	h.i32(1, typ)
	h.i32(2, int32(raw))
	h.i32(3, int32(len(body)))
	h.field(sub, thrift.Struct)
	for i, v := range fields {
		h.i32(int16(i+1), v)
	}
	h.stop()
	h.stop()
	return HandPage{Bytes: append(h.Bytes(), body...), Raw: raw}
}

// HandLevels encodes definition levels of 0 and 1 (valid) in the RLE
// hybrid encoding, a run per stretch of equal levels.
func HandLevels(valid []bool) []byte {
	var out []byte
	for i := 0; i < len(valid); {
		j := i
		for j < len(valid) && valid[j] == valid[i] {
			j++
		}
		out = binary.AppendUvarint(out, uint64(j-i)<<1)
		if valid[i] {
			out = append(out, 1)
		} else {
			out = append(out, 0)
		}
		i = j
	}
	return out
}

// HandFile writes a Parquet file of one row group of rows rows, with
// schema (root first, depth first) and chunks, to path.
func HandFile(t testing.TB, path string, schema []HandElem, rows int64, chunks []HandChunk) {
	t.Helper()
	var file bytes.Buffer
	file.WriteString("PAR1")
	type placed struct{ start, data, raw, stored int64 }
	at := make([]placed, len(chunks))
	for i, c := range chunks {
		at[i].start = int64(file.Len())
		at[i].data = at[i].start
		for k, p := range c.Pages {
			if c.Dict && k == 1 {
				at[i].data = int64(file.Len())
			}
			h, err := thrift.ParsePageHeader(p.Bytes)
			if err != nil {
				t.Fatal(err)
			}
			at[i].raw += int64(h.Size + p.Raw)
			file.Write(p.Bytes)
		}
		at[i].stored = int64(file.Len()) - at[i].start
	}
	var f compact
	f.i32(1, 1)
	f.list(2, thrift.Struct, len(schema))
	for _, e := range schema {
		if e.Phys >= 0 {
			f.i32(1, e.Phys)
		}
		if e.Length > 0 {
			f.i32(2, e.Length)
		}
		if e.Rep >= 0 {
			f.i32(3, e.Rep)
		}
		f.str(4, e.Name)
		if e.Phys < 0 && !e.NoChildren {
			f.i32(5, e.Children)
		}
		if e.UUID {
			f.field(10, thrift.Struct) // logicalType
			f.field(14, thrift.Struct) // UUID
			f.stop()
			f.stop()
		}
		f.stop()
	}
	f.i64(3, rows)
	f.list(4, thrift.Struct, 1) // row groups
	f.list(1, thrift.Struct, len(chunks))
	var total int64
	for i, c := range chunks {
		f.i64(2, at[i].start)     // file_offset
		f.field(3, thrift.Struct) // meta_data
		f.i32(1, c.Phys)
		f.i32list(2, c.Encodings...)
		f.strlist(3, c.Path...)
		f.i32(4, c.Codec)
		f.i64(5, c.Values)
		f.i64(6, at[i].raw)
		f.i64(7, at[i].stored)
		f.i64(9, at[i].data)
		if c.Dict {
			f.i64(11, at[i].start)
		}
		f.stop() // meta_data
		f.stop() // column chunk
		total += at[i].raw
	}
	f.i64(2, total)
	f.i64(3, rows)
	f.stop() // row group
	f.stop() // file metadata
	file.Write(f.Bytes())
	file.Write(binary.LittleEndian.AppendUint32(nil, uint32(f.Len())))
	file.WriteString("PAR1")
	if err := os.WriteFile(path, file.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// HandPages cuts a column chunk into its pages.
func HandPages(t testing.TB, chunk []byte) []HandPage {
	t.Helper()
	var pages []HandPage
	for at := 0; at < len(chunk); {
		h, err := thrift.ParsePageHeader(chunk[at:])
		if err != nil {
			t.Fatal(err)
		}
		end := at + h.Size + int(h.Compressed)
		pages = append(pages, HandPage{Bytes: chunk[at:end:end], Raw: int(h.Uncompressed)})
		at = end
	}
	return pages
}

// HandEncoding is the encoding of a data page's values.
func HandEncoding(t testing.TB, p HandPage) int32 {
	t.Helper()
	h, err := thrift.ParsePageHeader(p.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return int32(h.Encoding)
}
