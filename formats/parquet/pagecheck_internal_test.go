package parquet

import (
	"strings"
	"testing"

	pq "github.com/apache/arrow-go/v18/parquet"
	pqschema "github.com/apache/arrow-go/v18/parquet/schema"

	"github.com/sluicedata/sluice/formats/parquet/internal/thrift"
)

// column is a leaf of type typ, optional or required, as the page checks
// see it.
func column(t testing.TB, typ pq.Type, optional bool) chunkCheck {
	t.Helper()
	rep := pq.Repetitions.Required
	if optional {
		rep = pq.Repetitions.Optional
	}
	leaf, err := pqschema.NewPrimitiveNode("c", rep, typ, -1, -1)
	if err != nil {
		t.Fatal(err)
	}
	root, err := pqschema.NewGroupNode("schema", pq.Repetitions.Required, pqschema.FieldList{leaf}, -1)
	if err != nil {
		t.Fatal(err)
	}
	col := pqschema.NewSchema(root).Column(0)
	return chunkCheck{col: col, values: 1 << 20, valueBits: minValueBits(col)}
}

func int32Chunk(t testing.TB) chunkCheck { return column(t, pq.Types.Int32, false) }

// page is a page header's fields, written in Thrift as a writer would;
// a field of -1 is left out.
type page struct {
	typ, compressed int32
	sub             int16 // 5 data, 7 dictionary, 8 data v2, 0 none
	values, enc     int32
	defEnc          int32 // v1
	defLen, repLen  int32 // v2
}

func (p page) bytes() []byte {
	var c compact
	c.i32(1, p.typ)
	c.i32(2, p.compressed)
	c.i32(3, p.compressed)
	if p.sub != 0 {
		c.field(p.sub, thrift.Struct)
		c.i32(1, p.values)
		switch p.sub {
		case 5:
			c.i32(2, p.enc)
			c.i32(3, p.defEnc)
			c.i32(4, int32(pq.Encodings.RLE))
		case 7:
			c.i32(2, p.enc)
		case 8:
			c.i32(2, 0)
			c.i32(3, p.values)
			c.i32(4, p.enc)
			c.i32(5, p.defLen)
			c.i32(6, p.repLen)
		}
		c.stop()
	}
	c.stop()
	return append(c.Bytes(), make([]byte, max(p.compressed, 0))...)
}

var rle = int32(pq.Encodings.RLE)

// Each header arrow-go panics on, or decodes wrongly, is refused with what
// is wrong with it; the headers writers write pass.
func TestCheckChunkPages(t *testing.T) {
	i32, optI32 := int32Chunk(t), column(t, pq.Types.Int32, true)
	boolean, bytes := column(t, pq.Types.Boolean, false), column(t, pq.Types.ByteArray, false)
	dict := page{typ: thrift.PageDictionary, compressed: 8, sub: 7, values: 2, enc: int32(pq.Encodings.Plain)}
	for _, c := range []struct {
		name  string
		chunk chunkCheck
		pages []page
		want  string // "" for none
	}{
		{"plain v1", i32, []page{{typ: thrift.PageData, compressed: 8, sub: 5, values: 2, enc: 0}}, ""},
		{"plain v2", optI32, []page{{typ: thrift.PageDataV2, compressed: 8, sub: 8, values: 2, enc: 0, defLen: 2}}, ""},
		{"dictionary then indices", i32, []page{dict, {typ: thrift.PageData, compressed: 4, sub: 5, values: 2, enc: int32(pq.Encodings.RLEDict)}}, ""},
		{"booleans in RLE", boolean, []page{{typ: thrift.PageData, compressed: 4, sub: 5, values: 2, enc: rle}}, ""},
		{"an unknown page type is skipped", i32, []page{{typ: 6, compressed: 3}, {typ: thrift.PageData, compressed: 8, sub: 5, values: 2}}, ""},

		{"data page without its header", i32, []page{{typ: thrift.PageData, compressed: 8}}, "a data page without its data page header"},
		{"v2 page without its header", i32, []page{{typ: thrift.PageDataV2, compressed: 8}}, "a data page without its data page header"},
		{"dictionary page without its header", i32, []page{{typ: thrift.PageDictionary, compressed: 8}}, "a dictionary page without its dictionary page header"},
		{"negative size", i32, []page{{typ: thrift.PageData, compressed: -1, sub: 5, values: 2}}, "a negative page size"},
		{"negative values", i32, []page{{typ: thrift.PageData, compressed: 8, sub: 5, values: -3}}, "a data page of -3 values"},
		{"dictionary of booleans", boolean, []page{{typ: thrift.PageDictionary, compressed: 1, sub: 7, values: 2}}, "a dictionary of BOOLEAN values"},
		{"dictionary-encoded booleans", boolean, []page{{typ: thrift.PageData, compressed: 4, sub: 5, values: 2, enc: int32(pq.Encodings.RLEDict)}}, "BOOLEAN values in RLE_DICTIONARY"},
		{"delta booleans", boolean, []page{{typ: thrift.PageData, compressed: 4, sub: 5, values: 2, enc: int32(pq.Encodings.DeltaBinaryPacked)}}, "BOOLEAN values in DELTA_BINARY_PACKED"},
		{"delta lengths of ints", i32, []page{{typ: thrift.PageData, compressed: 4, sub: 5, values: 2, enc: int32(pq.Encodings.DeltaLengthByteArray)}}, "INT32 values in DELTA_LENGTH_BYTE_ARRAY"},
		{"split byte arrays", bytes, []page{{typ: thrift.PageData, compressed: 4, sub: 5, values: 2, enc: int32(pq.Encodings.ByteStreamSplit)}}, "BYTE_ARRAY values in BYTE_STREAM_SPLIT"},
		{"unknown encoding", i32, []page{{typ: thrift.PageData, compressed: 4, sub: 5, values: 2, enc: 77}}, "INT32 values in encoding 77"},
		{"definition levels in PLAIN", optI32, []page{{typ: thrift.PageData, compressed: 4, sub: 5, values: 2, defEnc: 0}}, "definition levels in PLAIN"},
		{"dictionary in delta", i32, []page{{typ: thrift.PageDictionary, compressed: 8, sub: 7, values: 2, enc: int32(pq.Encodings.DeltaBinaryPacked)}}, "a dictionary in DELTA_BINARY_PACKED"},
		{"dictionary of more values than bytes", i32, []page{{typ: thrift.PageDictionary, compressed: 8, sub: 7, values: 3}}, "a dictionary of 3 values in 8 bytes"},
		{"indices before the dictionary", i32, []page{{typ: thrift.PageData, compressed: 4, sub: 5, values: 2, enc: int32(pq.Encodings.RLEDict)}, dict}, "dictionary-encoded values before the chunk's dictionary page"},
		{"v2 levels longer than the page", optI32, []page{{typ: thrift.PageDataV2, compressed: 4, sub: 8, values: 2, defLen: 5}}, "levels of 0+5 bytes in a page of 4"},
		{"page past the chunk", i32, []page{{typ: thrift.PageData, compressed: 8, sub: 5, values: 2}}, "run 3 bytes past the end"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var chunk []byte
			var values int64
			for _, p := range c.pages {
				chunk = append(chunk, p.bytes()...)
				if p.typ != thrift.PageDictionary {
					values += int64(max(p.values, 0))
				}
			}
			ck := c.chunk
			ck.values = max(values, 1)
			if c.name == "page past the chunk" {
				chunk = chunk[:len(chunk)-3]
			}
			err := checkChunk(chunk, 4000, ck)
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case c.want != "" && err == nil:
				t.Fatalf("accepted, want %q", c.want)
			case c.want != "" && !strings.Contains(err.Error(), c.want):
				t.Fatalf("err = %v, want %q", err, c.want)
			case c.want != "" && !strings.Contains(err.Error(), `column "c": corrupt page at byte 4`):
				t.Fatalf("err = %v does not name the column and the page", err)
			}
		})
	}
}

// Pages past the chunk's value count are not arrow-go's to read, so not
// the checks' either: writers of old files pad chunks with other bytes.
func TestCheckChunkStopsAtItsValues(t *testing.T) {
	ck := int32Chunk(t)
	ck.values = 2
	chunk := append(page{typ: thrift.PageData, compressed: 8, sub: 5, values: 2}.bytes(), page{typ: thrift.PageData, compressed: 8}.bytes()...)
	if err := checkChunk(chunk, 0, ck); err != nil {
		t.Fatal(err)
	}
}

func FuzzPageHeader(f *testing.F) {
	f.Add(page{typ: thrift.PageData, compressed: 8, sub: 5, values: 2}.bytes())
	f.Add(page{typ: thrift.PageDictionary, compressed: 8, sub: 7, values: 2}.bytes())
	f.Add(page{typ: thrift.PageDataV2, compressed: 8, sub: 8, values: 2}.bytes())
	f.Fuzz(func(t *testing.T, b []byte) {
		ck := column(t, pq.Types.Int64, true)
		_ = checkChunk(b, 0, ck) // must not panic
		_ = checkFirstPage(b, 0, ck)
	})
}

// A page fetched alone (through the offset index) gets the checks of a
// whole chunk's pages.
func TestCheckPagesChecksHeaders(t *testing.T) {
	bad := page{typ: thrift.PageData, compressed: 8, sub: 5, values: 100, enc: int32(pq.Encodings.DeltaLengthByteArray)}.bytes()
	fe := &parquetFetched{spans: []span{{off: 1000, data: bad}}}
	fe.checks = []pageCheck{{offset: 1000, size: int64(len(bad)), rows: 100, chunk: int32Chunk(t)}}
	err := fe.checkPages()
	if err == nil || !strings.Contains(err.Error(), `column "c": corrupt page at byte 1000: INT32 values in DELTA_LENGTH_BYTE_ARRAY`) {
		t.Fatalf("err = %v", err)
	}
}

func BenchmarkCheckChunk(b *testing.B) {
	ck := column(b, pq.Types.Int64, true)
	var chunk []byte
	for range 1000 {
		chunk = append(chunk, page{typ: thrift.PageData, compressed: 64, sub: 5, values: 8, enc: rle, defEnc: rle}.bytes()...)
	}
	ck.values = 8000
	ck.col = column(b, pq.Types.Boolean, true).col
	b.SetBytes(int64(len(chunk)))
	for b.Loop() {
		if err := checkChunk(chunk, 0, ck); err != nil {
			b.Fatal(err)
		}
	}
}
