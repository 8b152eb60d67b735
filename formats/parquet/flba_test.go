package parquet_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/extensions"
	"github.com/apache/arrow-go/v18/arrow/memory"
	pq "github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/klauspost/compress/snappy"

	"github.com/sluicedata/sluice/formats"
	"github.com/sluicedata/sluice/formats/parquet"
)

// Rows of flbaMixedFile: [0, mixedDelta) dictionary-encoded,
// [mixedDelta, mixedPlain) in DELTA_BYTE_ARRAY, then PLAIN.
const mixedDelta, mixedPlain, mixedRows = 100, 250, 300

// mixedUUID is row i's UUID in flbaMixedFile (nil: null): the rows of
// the dictionary repeat its 12 entries; the others share prefixes of 0 to
// 16 bytes with the row before.
func mixedUUID(i int) []byte {
	if i%7 == 3 {
		return nil
	}
	if i < mixedDelta {
		return dictUUID(i % 12)
	}
	u := make([]byte, 16)
	for j := range u {
		if j < i%17 {
			u[j] = 0x55
		} else {
			u[j] = byte(i*31 + j*17)
		}
	}
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	return u
}

// dictUUID is entry k of flbaMixedFile's dictionary.
func dictUUID(k int) []byte {
	u := make([]byte, 16)
	for j := range u {
		u[j] = byte(0x11*k + j)
	}
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	return u
}

// deltaPages returns the pages of an optional BYTE_ARRAY column holding
// rows [from, to) of mixedUUID in DELTA_BYTE_ARRAY, Snappy, DATA_PAGE,
// written by arrow-go (which writes that encoding for BYTE_ARRAY only;
// its bytes are the same for FIXED_LEN_BYTE_ARRAY).
func deltaPages(t testing.TB, from, to int) []parquet.HandPage {
	b := array.NewBinaryBuilder(memory.DefaultAllocator, arrow.BinaryTypes.Binary)
	defer b.Release()
	for i := from; i < to; i++ {
		if u := mixedUUID(i); u != nil {
			b.Append(u)
		} else {
			b.AppendNull()
		}
	}
	col := b.NewArray()
	defer col.Release()
	var buf bytes.Buffer
	writeArraysTo(t, &buf, []arrow.Field{{Name: "u", Type: arrow.BinaryTypes.Binary, Nullable: true}}, []arrow.Array{col},
		pq.WithDictionaryDefault(false), pq.WithEncoding(pq.Encodings.DeltaByteArray), pq.WithCompression(compress.Codecs.Snappy),
		pq.WithDataPageVersion(pq.DataPageV1), pq.WithDataPageSize(256), pq.WithBatchSize(10), pq.WithStats(false))
	pf, err := file.NewParquetReader(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	cc, err := pf.MetaData().RowGroup(0).ColumnChunk(0)
	if err != nil {
		t.Fatal(err)
	}
	start := cc.DataPageOffset()
	pages := parquet.HandPages(t, buf.Bytes()[start:start+cc.TotalCompressedSize()])
	if len(pages) < 3 {
		t.Fatalf("%d DELTA_BYTE_ARRAY pages", len(pages))
	}
	for _, p := range pages {
		if enc := parquet.HandEncoding(t, p); enc != parquet.HandDeltaBytes {
			t.Fatalf("arrow-go wrote a page in encoding %d", enc)
		}
	}
	return pages
}

// writeArraysTo writes one row group of arrs to w.
func writeArraysTo(t testing.TB, w *bytes.Buffer, fields []arrow.Field, arrs []arrow.Array, opts ...pq.WriterProperty) {
	rec := array.NewRecordBatch(arrow.NewSchema(fields, nil), arrs, int64(arrs[0].Len()))
	defer rec.Release()
	fw, err := pqarrow.NewFileWriter(rec.Schema(), w, pq.NewWriterProperties(opts...), pqarrow.DefaultWriterProps())
	if err != nil {
		t.Fatal(err)
	}
	if err := fw.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := fw.Close(); err != nil {
		t.Fatal(err)
	}
}

// v1Snappy is a DATA_PAGE of rows rows (levels for an optional column,
// where valid is set) whose values are vals in encoding enc, Snappy.
func v1Snappy(rows int, valid []bool, enc int32, vals []byte) parquet.HandPage {
	var body []byte
	if valid != nil {
		levels := parquet.HandLevels(valid)
		body = binary.LittleEndian.AppendUint32(body, uint32(len(levels)))
		body = append(body, levels...)
	}
	body = append(body, vals...)
	return parquet.HandDataPageV1(int32(rows), enc, len(body), snappy.Encode(nil, body))
}

// flbaMixedFile writes a file of a required INT32 "id" and an optional
// FIXED_LEN_BYTE_ARRAY(16) "u" (a UUID where uuid is set) whose one chunk
// falls back from a dictionary to DELTA_BYTE_ARRAY, as parquet-mr's v2
// writer falls back, and then to PLAIN: a dictionary page and a page of
// indices, DELTA_BYTE_ARRAY pages, a PLAIN page. Snappy throughout.
func flbaMixedFile(t testing.TB, path string, uuid bool) {
	var ids []byte
	for i := range mixedRows {
		ids = binary.LittleEndian.AppendUint32(ids, uint32(i))
	}
	var dict []byte
	for k := range 12 {
		dict = append(dict, dictUUID(k)...) // PLAIN: the values end to end
	}
	var valid []bool
	indices := []byte{4} // the bit width, then an RLE run of one a value
	for i := range mixedDelta {
		valid = append(valid, mixedUUID(i) != nil)
		if mixedUUID(i) != nil {
			indices = append(indices, 1<<1, byte(i%12))
		}
	}
	pages := []parquet.HandPage{
		parquet.HandDictionaryPage(12, len(dict), snappy.Encode(nil, dict)),
		v1Snappy(mixedDelta, valid, parquet.HandRLEDict, indices),
	}
	pages = append(pages, deltaPages(t, mixedDelta, mixedPlain)...)
	valid = nil
	var plain []byte
	for i := mixedPlain; i < mixedRows; i++ {
		valid = append(valid, mixedUUID(i) != nil)
		plain = append(plain, mixedUUID(i)...)
	}
	pages = append(pages, v1Snappy(mixedRows-mixedPlain, valid, parquet.HandPlain, plain))
	parquet.HandFile(t, path, []parquet.HandElem{
		{Name: "schema", Phys: -1, Rep: -1, Children: 2},
		{Name: "id", Phys: 1, Rep: 0},
		{Name: "u", Phys: 7, Length: 16, Rep: 1, UUID: uuid},
	}, mixedRows, []parquet.HandChunk{
		{Path: []string{"id"}, Phys: 1, Codec: 1, Values: mixedRows, Encodings: []int32{parquet.HandPlain}, Pages: []parquet.HandPage{v1Snappy(mixedRows, nil, parquet.HandPlain, ids)}},
		{Path: []string{"u"}, Phys: 7, Codec: 1, Values: mixedRows, Encodings: []int32{parquet.HandPlain, parquet.HandRLE, parquet.HandRLEDict, parquet.HandDeltaBytes}, Dict: true, Pages: pages},
	})
}

// A FIXED_LEN_BYTE_ARRAY column whose chunk mixes DELTA_BYTE_ARRAY with a
// dictionary and PLAIN is read by the own decoder, whole or in part,
// every value as written and as DuckDB reads it; arrow-go, which cannot
// decode it, is not given it, and Format{ArrowGoDecode: true} refuses the
// file by name. Before, the file was refused whatever the options.
func TestFixedLenDeltaByteArrayMixed(t *testing.T) {
	dir := t.TempDir()
	for _, uuid := range []bool{false, true} {
		path := filepath.Join(dir, "fixed.parquet")
		want := arrow.DataType(&arrow.FixedSizeBinaryType{ByteWidth: 16})
		if uuid {
			path, want = filepath.Join(dir, "uuid.parquet"), extensions.NewUUIDType()
		}
		flbaMixedFile(t, path, uuid)
		ctx := context.Background()
		for _, r := range [][2]int64{{0, mixedRows}, {120, 280}, {mixedDelta - 1, mixedPlain + 1}} {
			before := parquet.FastChunks()
			batches, mem, err := readFormatRange(ctx, path, parquet.Format{}, 64, r[0], r[1])
			if err != nil {
				t.Fatalf("%s rows %v: %v", filepath.Base(path), r, err)
			}
			if took := parquet.FastChunks() - before; took != 2 {
				t.Errorf("%s rows %v: the own decoder took %d chunks of 2", filepath.Base(path), r, took)
			}
			row := int(r[0])
			for _, b := range batches {
				if got := b.Schema().Field(1).Type; !arrow.TypeEqual(got, want) {
					t.Fatalf("u read as %s, want %s", got, want)
				}
				ids := b.Column(0).(*array.Int32)
				us := b.Column(1)
				if ext, ok := us.(array.ExtensionArray); ok {
					us = ext.Storage()
				}
				fsb := us.(*array.FixedSizeBinary)
				for i := range int(b.NumRows()) {
					u := mixedUUID(row)
					if ids.Value(i) != int32(row) || fsb.IsNull(i) != (u == nil) || u != nil && !bytes.Equal(fsb.Value(i), u) {
						t.Fatalf("%s row %d: id %d, u %x (null %v), want %x", filepath.Base(path), row, ids.Value(i), fsb.Value(i), fsb.IsNull(i), u)
					}
					row++
				}
			}
			releaseBatches(batches)
			if row != int(r[1]) {
				t.Errorf("%s rows %v: read to %d", filepath.Base(path), r, row)
			}
			if n := mem.CurrentAlloc(); n != 0 {
				t.Errorf("%s: %d bytes outstanding", filepath.Base(path), n)
			}
		}
		_, err := formats.Plan(ctx, []string{path}, formats.PlanOptions{Formats: []formats.Format{parquet.Format{ArrowGoDecode: true}}})
		if err == nil || !strings.Contains(err.Error(), filepath.Base(path)) || !strings.Contains(err.Error(), `column "u" is FIXED_LEN_BYTE_ARRAY(16) in DELTA_BYTE_ARRAY encoding, which arrow-go cannot decode`) {
			t.Errorf("ArrowGoDecode: %v", err)
		}
	}
	// DuckDB reads the same UUIDs.
	path := filepath.Join(dir, "uuid.parquet")
	_, cols := readFile(t, path)
	us := cols[1].(*extensions.UUIDArray)
	got := make([]string, us.Len())
	for i := range got {
		if !us.IsNull(i) {
			got[i] = us.Value(i).String()
		}
	}
	checkDuckUUIDs(t, path, got)
}
