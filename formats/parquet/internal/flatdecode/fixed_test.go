package flatdecode

import (
	"bytes"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/extensions"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/sluicedata/sluice/formats/parquet/internal/thrift"
)

// deltaFixedValues is a DELTA_BYTE_ARRAY values section of two 16-byte
// values, the second sharing 8 bytes with the first: prefix lengths 0, 8
// and suffix lengths 16, 8 (each DELTA_BINARY_PACKED: blocks of 128 values
// in 4 miniblocks, 2 values, the first, then one block whose one delta
// needs no bits), then the suffixes.
var deltaFixedValues = append([]byte{
	0x80, 0x01, 0x04, 0x02, 0x00, 0x10, 0, 0, 0, 0, // prefixes: first 0, min delta 8
	0x80, 0x01, 0x04, 0x02, 0x20, 0x0f, 0, 0, 0, 0, // suffix lengths: first 16, min delta -8
}, "abcdefghijklmnopXXXXXXXX"...)

// fixedChunk is a chunk of a required FIXED_LEN_BYTE_ARRAY(16) column of
// eight rows in DATA_PAGE_V2, in each encoding the decoder reads of it: a
// dictionary of two values and a page of indices 1, 0; a DELTA_BYTE_ARRAY
// page of the values delta; a PLAIN page; a BYTE_STREAM_SPLIT page.
func fixedChunk(delta []byte) []byte {
	var chunk []byte
	page := func(typ, values, enc int, body []byte) {
		chunk = append(chunk, pageHeaderBytes(typ, len(body), values, enc)...)
		chunk = append(chunk, body...)
	}
	page(thrift.PageDictionary, 2, encPlain, []byte("0123456789abcdeffedcba9876543210"))
	page(thrift.PageDataV2, 2, encRLEDictionary, []byte{1, 1<<1 | 1, 0b01}) // bit width 1, then 8 bit-packed: 1, 0, ...
	page(thrift.PageDataV2, 2, encDeltaByteArray, delta)
	page(thrift.PageDataV2, 2, encPlain, []byte("plain-value-0000plain-value-0001"))
	var split []byte // byte b of every value, then byte b+1
	for b := range 16 {
		split = append(split, "byte-stream-spl0"[b], "byte-stream-spl1"[b])
	}
	page(thrift.PageDataV2, 2, encByteStreamSplit, split)
	return chunk
}

// FIXED_LEN_BYTE_ARRAY values in every encoding, as fixed_size_binary and
// as arrow.uuid (an extension over it), read whole and in batches, every
// third skipped.
func TestFixedLenByteArray(t *testing.T) {
	want := []string{"fedcba9876543210", "0123456789abcdef", "abcdefghijklmnop", "abcdefghXXXXXXXX",
		"plain-value-0000", "plain-value-0001", "byte-stream-spl0", "byte-stream-spl1"}
	for _, typ := range []arrow.DataType{&arrow.FixedSizeBinaryType{ByteWidth: 16}, extensions.NewUUIDType()} {
		if !Supports(FixedLenByteArray, typ) {
			t.Fatalf("%s not supported", typ)
		}
		for _, batch := range []int{8, 3, 1} {
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			col := Column{Name: "f", Physical: FixedLenByteArray, Type: typ, Values: 8, Rows: 8, MaxPage: 1 << 10}
			r, err := Open(fixedChunk(deltaFixedValues), col, mem)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for k := 0; r.Rows() > 0; k++ {
				n := min(batch, int(r.Rows()))
				if k%3 == 2 {
					if err := r.Skip(int64(n)); err != nil {
						t.Fatal(err)
					}
					for range n {
						got = append(got, "-")
					}
					continue
				}
				a, err := r.Next(n)
				if err != nil {
					t.Fatal(err)
				}
				if !arrow.TypeEqual(a.DataType(), typ) {
					t.Fatalf("%s read as %s", typ, a.DataType())
				}
				fsb := a
				if ext, ok := a.(array.ExtensionArray); ok {
					fsb = ext.Storage()
				}
				for i := range n {
					got = append(got, string(fsb.(*array.FixedSizeBinary).Value(i)))
				}
				a.Release()
			}
			r.Release()
			if len(got) != len(want) {
				t.Fatalf("%d rows", len(got))
			}
			for i, g := range got {
				if g != "-" && g != want[i] {
					t.Fatalf("%s, batches of %d: row %d is %q, want %q", typ, batch, i, g, want[i])
				}
			}
			mem.AssertSize(t, 0)
		}
	}
	// A DELTA_BYTE_ARRAY value of another length than the column's fails
	// the read, naming the column and the page.
	short := bytes.Clone(deltaFixedValues)
	short[14] = 0x1e // suffix lengths 15, 8
	r, err := Open(fixedChunk(short[:len(short)-1]), Column{Name: "f", Physical: FixedLenByteArray, Type: &arrow.FixedSizeBinaryType{ByteWidth: 16}, Values: 8, Rows: 8, MaxPage: 1 << 10}, memory.DefaultAllocator)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release()
	_, err = r.Next(8)
	if err == nil || !strings.Contains(err.Error(), `column "f": page 2`) || !strings.Contains(err.Error(), "value 0: 15 bytes in a FIXED_LEN_BYTE_ARRAY(16) column") {
		t.Errorf("got %v", err)
	}
	// Widths other than the type's, and DELTA_LENGTH_BYTE_ARRAY, are not
	// FIXED_LEN_BYTE_ARRAY's.
	if Supports(FixedLenByteArray, arrow.BinaryTypes.Binary) || encodes(FixedLenByteArray, encDeltaLength) || encodes(FixedLenByteArray, encDeltaBinaryPacked) {
		t.Error("FIXED_LEN_BYTE_ARRAY taken where it is not")
	}
}
