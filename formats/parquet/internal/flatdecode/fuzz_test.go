package flatdecode

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	pq "github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/sluicedata/sluice/formats/parquet/internal/thrift"
)

var physicalOf = map[string]Physical{"b": Boolean, "i32": Int32, "i64": Int64, "f32": Float, "f64": Double, "s": ByteArray, "fl": FixedLenByteArray}

// fixed16 is the type of the FIXED_LEN_BYTE_ARRAY columns of the seeds.
var fixed16 = &arrow.FixedSizeBinaryType{ByteWidth: 16}

// sampleChunk is a column chunk written by arrow-go, as a fuzz seed.
type sampleChunk struct {
	col   Column
	chunk []byte
}

// sampleChunks writes a small file of one column of each physical type,
// nullable, in encoding enc and codec, and returns its column chunks.
// arrow-go writes DELTA_BYTE_ARRAY for BYTE_ARRAY only: that column of
// FIXED_LEN_BYTE_ARRAY(16) is written as BYTE_ARRAY of 16-byte values,
// whose pages are the same.
func sampleChunks(t testing.TB, enc pq.Encoding, codec compress.Compression, v2 bool) []sampleChunk {
	mem := memory.DefaultAllocator
	fixedAs := arrow.DataType(fixed16)
	if enc == pq.Encodings.DeltaByteArray {
		fixedAs = arrow.BinaryTypes.Binary
	}
	fields := []arrow.Field{
		{Name: "b", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
		{Name: "i32", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
		{Name: "i64", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "f32", Type: arrow.PrimitiveTypes.Float32, Nullable: true},
		{Name: "f64", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "fl", Type: fixedAs, Nullable: true},
	}
	const rows = 300
	bld := array.NewRecordBuilder(mem, arrow.NewSchema(fields, nil))
	defer bld.Release()
	for i := range rows {
		if i%7 == 3 {
			for j := range fields {
				bld.Field(j).AppendNull()
			}
			continue
		}
		bld.Field(0).(*array.BooleanBuilder).Append(i%3 == 0)
		bld.Field(1).(*array.Int32Builder).Append(int32(i * i % 50))
		bld.Field(2).(*array.Int64Builder).Append(int64(i) << 33)
		bld.Field(3).(*array.Float32Builder).Append(float32(i % 9))
		bld.Field(4).(*array.Float64Builder).Append(float64(i) / 3)
		bld.Field(5).(*array.StringBuilder).Append(strings.Repeat("x", i%5))
		fl := fmt.Appendf(nil, "%015d", i%40*1237)
		fl = append(fl, byte(i))
		if fb, ok := bld.Field(6).(*array.FixedSizeBinaryBuilder); ok {
			fb.Append(fl)
		} else {
			bld.Field(6).(*array.BinaryBuilder).Append(fl)
		}
	}
	rec := bld.NewRecordBatch()
	defer rec.Release()
	version := pq.DataPageV1
	if v2 {
		version = pq.DataPageV2
	}
	opts := []pq.WriterProperty{pq.WithCompression(codec), pq.WithDataPageVersion(version), pq.WithDataPageSize(200), pq.WithBatchSize(50)}
	if enc == pq.Encodings.RLEDict {
		opts = append(opts, pq.WithDictionaryDefault(true))
	} else {
		opts = append(opts, pq.WithDictionaryDefault(false))
		for _, fl := range fields {
			if encodes(physicalOf[fl.Name], int64(enc)) {
				opts = append(opts, pq.WithEncodingFor(fl.Name, enc))
			}
		}
	}
	var buf bytes.Buffer
	w, err := pqarrow.NewFileWriter(rec.Schema(), &buf, pq.NewWriterProperties(opts...), pqarrow.DefaultWriterProps())
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	pf, err := file.NewParquetReader(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	md := pf.MetaData()
	var out []sampleChunk
	for c := range md.Schema.NumColumns() {
		cc, err := md.RowGroup(0).ColumnChunk(c)
		if err != nil {
			t.Fatal(err)
		}
		start := cc.DataPageOffset()
		if cc.HasDictionaryPage() && cc.DictionaryPageOffset() > 0 {
			start = min(start, cc.DictionaryPageOffset())
		}
		phys, typ := Physical(md.Schema.Column(c).PhysicalType()), fields[c].Type
		if fields[c].Name == "fl" {
			phys, typ = FixedLenByteArray, fixed16
		}
		col := Column{Name: fields[c].Name, Offset: start, Physical: phys, Type: typ,
			Optional: true, Codec: Codec(cc.Compression()), Values: cc.NumValues(), Rows: rows, MaxPage: cc.TotalUncompressedSize()}
		out = append(out, sampleChunk{col: col, chunk: bytes.Clone(buf.Bytes()[start : start+cc.TotalCompressedSize()])})
	}
	return out
}

// runtimeChecked is a checked allocator over Go's that says so
// (unzeroed.RuntimeMemory): a Reader then lends dictionary stretches.
type runtimeChecked struct{ *memory.CheckedAllocator }

func (runtimeChecked) RuntimeMemory() bool { return true }

// fuzzAllocator is the allocator of a decode of batches of batch rows: a
// checked one, which every odd batch size reads through runtimeChecked, so
// that both ways of building a dictionary-encoded batch are fuzzed.
func fuzzAllocator(mem *memory.CheckedAllocator, batch int) memory.Allocator {
	if batch%2 == 1 {
		return runtimeChecked{mem}
	}
	return mem
}

// decodeAll reads every row of chunk in batches of batch rows and
// releases them; errors must name the column and the page.
func decodeAll(t *testing.T, chunk []byte, col Column, batch int) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer func() {
		if n := mem.CurrentAlloc(); n != 0 {
			t.Fatalf("%d bytes outstanding", n)
		}
	}()
	r, err := Open(chunk[:len(chunk):len(chunk)], col, fuzzAllocator(mem, batch))
	if err != nil {
		return
	}
	drain(t, r, batch)
}

// decodePages cuts chunk into its pages, as a read fetched page by page
// has them, and reads them with OpenPages as decodeAll does.
func decodePages(t *testing.T, chunk []byte, col Column, batch int) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer func() {
		if n := mem.CurrentAlloc(); n != 0 {
			t.Fatalf("%d bytes outstanding", n)
		}
	}()
	var pages []Page
	for at := 0; at < len(chunk); {
		h, err := parseHeader(chunk[at:])
		if err != nil || h.Compressed < 0 || h.Compressed > int64(len(chunk)-at-h.Size) {
			return
		}
		end := at + h.Size + int(h.Compressed)
		pages = append(pages, Page{Offset: int64(at), Index: len(pages), Bytes: chunk[at:end:end]})
		at = end
	}
	r, err := OpenPages(pages, col, fuzzAllocator(mem, batch))
	if err != nil {
		return
	}
	drain(t, r, batch)
}

// drain reads r's rows in batches of batch, every third skipped, and
// releases r, whose buffers the next Reader then takes.
func drain(t *testing.T, r *Reader, batch int) {
	defer r.Release()
	for i := 0; r.Rows() > 0; i++ {
		if i%3 == 1 {
			// Every third batch is skipped, not built.
			if err := r.Skip(min(int64(batch), r.Rows())); err != nil {
				if !strings.Contains(err.Error(), "column ") || !strings.Contains(err.Error(), "page ") {
					t.Fatalf("error names no column and page: %v", err)
				}
				return
			}
			continue
		}
		a, err := r.Next(int(min(int64(batch), r.Rows())))
		if err != nil {
			if !strings.Contains(err.Error(), "column ") || !strings.Contains(err.Error(), "page ") {
				t.Fatalf("error names no column and page: %v", err)
			}
			return
		}
		if err := array.ValidateFull(a); err != nil {
			t.Fatalf("invalid array: %v", err)
		}
		a.Release()
	}
}

// FuzzChunk feeds column chunks, valid ones mutated, to the whole decoder:
// page headers, codecs, levels and every value encoding. No input may
// panic, read outside its bytes or leave Arrow memory outstanding.
func FuzzChunk(f *testing.F) {
	type seed struct {
		enc   pq.Encoding
		codec compress.Compression
		v2    bool
	}
	for _, s := range []seed{
		{pq.Encodings.Plain, compress.Codecs.Uncompressed, false},
		{pq.Encodings.RLEDict, compress.Codecs.Uncompressed, false},
		{pq.Encodings.RLEDict, compress.Codecs.Snappy, true},
		{pq.Encodings.DeltaBinaryPacked, compress.Codecs.Uncompressed, true},
		{pq.Encodings.ByteStreamSplit, compress.Codecs.Uncompressed, false},
		{pq.Encodings.RLE, compress.Codecs.Zstd, true},
		{pq.Encodings.Plain, compress.Codecs.Gzip, false},
		{pq.Encodings.Plain, compress.Codecs.Lz4Raw, true},
		{pq.Encodings.DeltaLengthByteArray, compress.Codecs.Uncompressed, false},
		{pq.Encodings.DeltaLengthByteArray, compress.Codecs.Snappy, true},
		{pq.Encodings.DeltaByteArray, compress.Codecs.Uncompressed, false},
		{pq.Encodings.DeltaByteArray, compress.Codecs.Zstd, true},
	} {
		for _, c := range sampleChunks(f, s.enc, s.codec, s.v2) {
			if !encodes(c.col.Physical, int64(s.enc)) && s.enc != pq.Encodings.RLEDict {
				continue
			}
			f.Add(c.chunk, uint8(c.col.Physical), uint8(c.col.Codec), uint16(c.col.Rows), true, uint8(37))
		}
	}
	// Dictionary indices that count up, which batches of an odd size
	// lend (see fuzzAllocator): 0 to 15, of INT32 and of strings.
	for _, p := range []Physical{Int32, ByteArray} {
		f.Add(identityChunk(p, 16), uint8(p), uint8(Uncompressed), uint16(16), false, uint8(4))
	}
	// The deprecated LZ4 codec, in each framing (see DecodeLZ4).
	for _, c := range lz4Chunks(f) {
		f.Add(c, uint8(Int32), uint8(LZ4), uint16(64), false, uint8(9))
	}
	// FIXED_LEN_BYTE_ARRAY(16) in each encoding, by hand.
	f.Add(fixedChunk(deltaFixedValues), uint8(FixedLenByteArray), uint8(Uncompressed), uint16(8), false, uint8(2))
	types := map[Physical]arrow.DataType{Boolean: arrow.FixedWidthTypes.Boolean, Int32: arrow.PrimitiveTypes.Int8, Int64: arrow.FixedWidthTypes.Timestamp_us,
		Float: arrow.PrimitiveTypes.Float32, Double: arrow.PrimitiveTypes.Float64, ByteArray: arrow.BinaryTypes.LargeBinary, FixedLenByteArray: fixed16}
	f.Fuzz(func(t *testing.T, chunk []byte, phys, codec uint8, rows uint16, optional bool, batch uint8) {
		typ, ok := types[Physical(phys)]
		if !ok {
			return
		}
		col := Column{Name: "c", Physical: Physical(phys), Type: typ, Optional: optional, Codec: Codec(codec), Values: int64(rows), Rows: int64(rows), MaxPage: 1 << 20}
		decodeAll(t, chunk, col, int(batch)+1)
		decodePages(t, chunk, col, int(batch)+1)
	})
}

// FuzzLevels decodes definition levels into validity bits.
func FuzzLevels(f *testing.F) {
	f.Add([]byte{0x03, 0xff, 0x10, 0x01}, uint16(20))
	f.Add([]byte{0x06, 0x01}, uint16(3))
	f.Fuzz(func(t *testing.T, data []byte, n uint16) {
		dst := make([]byte, (int(n)+7)/8)
		set, err := levelsBitmap(data[:len(data):len(data)], int(n), dst)
		if err == nil && (set < 0 || set > int(n)) {
			t.Fatalf("%d set of %d", set, n)
		}
	})
}

// FuzzHybrid decodes RLE / bit-packed hybrid values: dictionary indices.
func FuzzHybrid(f *testing.F) {
	f.Add([]byte{0x03, 0x88, 0xc6, 0xfa}, uint8(3), uint16(8))
	f.Add([]byte{0x08, 0x05}, uint8(4), uint16(4))
	// Bit-packed runs long enough to be read 8 bytes at a time, of each
	// width a dictionary index of up to 32 bits may have, and then an RLE
	// run.
	for _, w := range []int{1, 7, 15, 17, 31, 32} {
		run := []byte{8<<1 | 1}
		for i := range 8 * w {
			run = append(run, byte(i*151+w*29))
		}
		run = append(run, 5<<1, 1, 0, 0, 0)
		f.Add(run, uint8(w), uint16(69))
	}
	f.Fuzz(func(t *testing.T, data []byte, width uint8, n uint16) {
		if width > 32 {
			return
		}
		h := newHybrid(data[:len(data):len(data)], uint(width))
		dst := make([]uint32, n)
		// In two calls, the second starting inside a run.
		half := int(n) / 3
		err := h.next(dst[:half])
		if err == nil {
			err = h.next(dst[half:])
		}
		if err != nil {
			return
		}
		if want := hybridBitByBit(data, uint(width), int(n)); want != nil && !slices.Equal(dst, want) {
			t.Fatalf("decoded %v, read bit by bit %v", dst, want)
		}
		for _, v := range dst {
			if width < 32 && v>>width != 0 {
				t.Fatalf("value %d wider than %d bits", v, width)
			}
		}
	})
}

// hybridBitByBit decodes n values of the RLE / bit-packed hybrid encoding
// one bit at a time, as the format describes it, or returns nil where its
// runs end before n values: what hybrid.next is checked against.
func hybridBitByBit(data []byte, w uint, n int) []uint32 {
	var out []uint32
	pos := 0
	for len(out) < n {
		hdr, k := binary.Uvarint(data[pos:])
		if k <= 0 {
			return nil
		}
		pos += k
		if hdr&1 == 0 { // RLE
			nb := int(w+7) / 8
			if pos+nb > len(data) {
				return nil
			}
			var v uint32
			for i := range nb {
				v |= uint32(data[pos+i]) << (8 * i)
			}
			pos += nb
			for range min(int(hdr>>1), n-len(out)) {
				out = append(out, v)
			}
			continue
		}
		// Bit-packed: groups of 8 values, the last run's padding possibly
		// cut; values are taken while their bits are all there.
		start, count := pos*8, int(hdr>>1)*8
		for i := 0; i < count && len(out) < n; i++ {
			var v uint32
			for b := range int(w) {
				at := start + i*int(w) + b
				if at/8 >= len(data) {
					return nil
				}
				v |= uint32(data[at/8]>>(at%8)&1) << b
			}
			out = append(out, v)
		}
		pos += min(int(hdr>>1)*int(w), len(data)-pos)
	}
	return out
}

// FuzzDelta decodes DELTA_BINARY_PACKED integers.
func FuzzDelta(f *testing.F) {
	var seed []byte
	for _, v := range []uint64{128, 4, 5, 2} {
		seed = binary.AppendUvarint(seed, v)
	}
	seed = append(seed, 0x02, 3, 0, 0, 0, 0xff, 0xff, 0xff, 0xff)
	f.Add(seed, false, uint16(5))
	f.Fuzz(func(t *testing.T, data []byte, is32 bool, n uint16) {
		var d delta
		bits := uint(64)
		if is32 {
			bits = 32
		}
		if err := d.init(data[:len(data):len(data)], bits); err != nil {
			return
		}
		_ = d.next(make([]uint64, min(int(n), d.left)))
	})
}

// FuzzValues decodes a page's values section alone, in each encoding, for
// each physical type: PLAIN, BYTE_STREAM_SPLIT, DELTA_BINARY_PACKED,
// DELTA_(LENGTH_)BYTE_ARRAY, dictionary indices and RLE booleans.
func FuzzValues(f *testing.F) {
	f.Add([]byte{1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0}, uint8(1), uint8(0), uint16(3), uint8(2))
	f.Add([]byte{2, 3, 0x10}, uint8(6), uint8(8), uint16(4), uint8(1))
	f.Add(deltaFixedValues, uint8(FixedLenByteArray), uint8(encDeltaByteArray), uint16(2), uint8(1))
	f.Fuzz(func(t *testing.T, values []byte, phys, enc uint8, n uint16, batch uint8) {
		p := Physical(phys)
		typ, ok := map[Physical]arrow.DataType{Boolean: arrow.FixedWidthTypes.Boolean, Int32: arrow.PrimitiveTypes.Int32, Int64: arrow.PrimitiveTypes.Int64,
			Float: arrow.PrimitiveTypes.Float32, Double: arrow.PrimitiveTypes.Float64, ByteArray: arrow.BinaryTypes.Binary, FixedLenByteArray: fixed16}[p]
		if !ok || !encodes(p, int64(enc)) {
			return
		}
		// An uncompressed DATA_PAGE_V2 of one required column, with a
		// dictionary of three values where it is dictionary encoded.
		var chunk []byte
		if enc == encPlainDictionary || enc == encRLEDictionary {
			dict := dictionaryBytes(p)
			chunk = append(chunk, pageHeaderBytes(thrift.PageDictionary, len(dict), 3, encPlain)...)
			chunk = append(chunk, dict...)
		}
		chunk = append(chunk, pageHeaderBytes(thrift.PageDataV2, len(values), int(n), int(enc))...)
		chunk = append(chunk, values...)
		col := Column{Name: "v", Physical: p, Type: typ, Values: int64(n), Rows: int64(n), MaxPage: 1 << 20}
		decodeAll(t, chunk, col, int(batch)+1)
		decodePages(t, chunk, col, int(batch)+1)
	})
}

// identityChunk is a chunk of n values of p, a dictionary of n entries
// and a DATA_PAGE_V2 of indices 0 to n-1 (n a multiple of 8, at most 256),
// bit-packed 8 bits each.
func identityChunk(p Physical, n int) []byte {
	var dict []byte
	for i := range n {
		if p == ByteArray {
			dict = binary.LittleEndian.AppendUint32(dict, 2)
			dict = append(dict, 'a'+byte(i%26), 'A'+byte(i/26))
			continue
		}
		dict = binary.LittleEndian.AppendUint32(dict, uint32(i*3+1))
	}
	values := []byte{8, byte(n/8<<1 | 1)}
	for i := range n {
		values = append(values, byte(i))
	}
	chunk := append(pageHeaderBytes(thrift.PageDictionary, len(dict), n, encPlain), dict...)
	chunk = append(chunk, pageHeaderBytes(thrift.PageDataV2, len(values), n, encRLEDictionary)...)
	return append(chunk, values...)
}

func dictionaryBytes(p Physical) []byte {
	switch p {
	case ByteArray:
		return []byte{1, 0, 0, 0, 'a', 0, 0, 0, 0, 2, 0, 0, 0, 'b', 'c'}
	case FixedLenByteArray:
		return make([]byte, 3*fixed16.ByteWidth)
	default:
		return make([]byte, 3*physWidth(p))
	}
}

// pageHeaderBytes encodes a PageHeader in Thrift's compact protocol, of
// an uncompressed page.
func pageHeaderBytes(typ, size, values, enc int) []byte {
	return pageHeaderSizes(typ, size, size, values, enc, false)
}

// pageHeaderSizes encodes a PageHeader of a dictionary page or a
// DATA_PAGE_V2 of one required column whose body takes stored bytes, raw
// once decompressed (where compressed says it is).
func pageHeaderSizes(typ, raw, stored, values, enc int, compressed bool) []byte {
	zz := func(v int) []byte { return binary.AppendUvarint(nil, uint64(int64(v)<<1^int64(v)>>63)) }
	var b []byte
	field := func(delta, t byte, v int) {
		b = append(b, delta<<4|t)
		b = append(b, zz(v)...)
	}
	field(1, thrift.I32, typ)
	field(1, thrift.I32, raw)
	field(1, thrift.I32, stored)
	if typ == thrift.PageDictionary {
		b = append(b, 4<<4|thrift.Struct) // field 7
		field(1, thrift.I32, values)
		field(1, thrift.I32, enc)
		b = append(b, thrift.Stop)
	} else {
		b = append(b, 5<<4|thrift.Struct) // field 8
		field(1, thrift.I32, values)      // num_values
		field(1, thrift.I32, 0)           // num_nulls
		field(1, thrift.I32, values)      // num_rows
		field(1, thrift.I32, enc)
		field(1, thrift.I32, 0) // definition_levels_byte_length
		field(1, thrift.I32, 0) // repetition_levels_byte_length
		if compressed {
			b = append(b, 1<<4|thrift.True)
		} else {
			b = append(b, 1<<4|thrift.False)
		}
		b = append(b, thrift.Stop)
	}
	return append(b, thrift.Stop)
}

// TestSamples decodes the fuzz seeds and checks them against arrow-go,
// and the FIXED_LEN_BYTE_ARRAY column's values, in each encoding, against
// those written.
func TestSamples(t *testing.T) {
	for _, enc := range []pq.Encoding{pq.Encodings.Plain, pq.Encodings.RLEDict, pq.Encodings.DeltaBinaryPacked, pq.Encodings.ByteStreamSplit, pq.Encodings.DeltaLengthByteArray, pq.Encodings.DeltaByteArray} {
		for _, c := range sampleChunks(t, enc, compress.Codecs.Snappy, false) {
			r, err := Open(c.chunk, c.col, memory.DefaultAllocator)
			if err != nil {
				if encodes(c.col.Physical, int64(enc)) || enc == pq.Encodings.RLEDict && c.col.Physical != Boolean {
					t.Errorf("%s %s: %v", enc, c.col.Name, err)
				}
				continue
			}
			if c.col.Physical == FixedLenByteArray {
				a, err := r.Next(int(r.Rows()))
				if err != nil {
					t.Fatalf("%s %s: %v", enc, c.col.Name, err)
				}
				fl := a.(*array.FixedSizeBinary)
				for i := range fl.Len() {
					want := fmt.Appendf(nil, "%015d", i%40*1237)
					want = append(want, byte(i))
					if fl.IsNull(i) != (i%7 == 3) || !fl.IsNull(i) && !bytes.Equal(fl.Value(i), want) {
						t.Fatalf("%s %s: row %d: %q (null %v), want %q", enc, c.col.Name, i, fl.Value(i), fl.IsNull(i), want)
					}
				}
				a.Release()
			}
			r.Release()
		}
	}
}

// lz4Values is the PLAIN values of lz4Chunks: 64 INT32.
func lz4Values() []byte {
	var b []byte
	for i := range 64 {
		b = binary.LittleEndian.AppendUint32(b, uint32(i%9*1000))
	}
	return b
}

// lz4Block compresses src into one LZ4 block: a Hadoop frame's.
func lz4Block(t testing.TB, src []byte) []byte {
	return hadoopFrames(t, src, 1)[hadoopPrefix:]
}

// hadoopFrames is src in Hadoop's framing, in parts frames.
func hadoopFrames(t testing.TB, src []byte, parts int) []byte {
	var out []byte
	for k := range parts {
		var err error
		if out, err = AppendLZ4Frame(out, src[k*len(src)/parts:(k+1)*len(src)/parts]); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// lz4Chunks are chunks of one DATA_PAGE_V2 of lz4Values in the deprecated
// LZ4 codec: one Hadoop frame, three, a bare block.
func lz4Chunks(t testing.TB) [][]byte {
	raw := lz4Values()
	var out [][]byte
	for _, body := range [][]byte{hadoopFrames(t, raw, 1), hadoopFrames(t, raw, 3), lz4Block(t, raw)} {
		out = append(out, append(pageHeaderSizes(thrift.PageDataV2, len(raw), len(body), 64, encPlain, true), body...))
	}
	return out
}

// TestLZ4 decodes each framing of the deprecated LZ4 codec, value by value,
// and refuses what is neither framing.
func TestLZ4(t *testing.T) {
	raw := lz4Values()
	for i, chunk := range lz4Chunks(t) {
		r, err := Open(chunk, Column{Name: "c", Physical: Int32, Type: arrow.PrimitiveTypes.Int32, Codec: LZ4, Values: 64, Rows: 64, MaxPage: 1 << 10}, memory.DefaultAllocator)
		if err != nil {
			t.Fatal(err)
		}
		a, err := r.Next(64)
		if err != nil {
			t.Fatalf("framing %d: %v", i, err)
		}
		for k, v := range a.(*array.Int32).Int32Values() {
			if want := int32(binary.LittleEndian.Uint32(raw[4*k:])); v != want {
				t.Fatalf("framing %d: row %d is %d, want %d", i, k, v, want)
			}
		}
		a.Release()
		r.Release()
	}
	// Frames whose sizes do not add up, and bytes no decoder makes sense
	// of, are errors; a bare block whose first bytes happen to read as a
	// frame's sizes is still a bare block.
	framed := hadoopFrames(t, raw, 2)
	for _, c := range []struct {
		name string
		src  []byte
		ok   bool
	}{
		{"a frame past the page", framed[:len(framed)-1], false},
		{"bytes after the frames", append(append([]byte{}, framed...), 0), false},
		{"a frame of more than the page holds", append(binary.BigEndian.AppendUint32(nil, 1<<20), framed[4:]...), false},
		{"garbage", []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, false},
		{"a bare block", lz4Block(t, raw), true},
		{"nothing", nil, false},
	} {
		dst := make([]byte, len(raw))
		n, err := DecodeLZ4(dst, c.src)
		if c.ok != (err == nil && n == len(raw) && bytes.Equal(dst, raw)) {
			t.Errorf("%s: %d bytes, %v", c.name, n, err)
		}
	}
}

// FuzzLZ4 decodes arbitrary bytes as the deprecated LZ4 codec into a
// buffer of an arbitrary size: no panic, no write past it.
func FuzzLZ4(f *testing.F) {
	raw := lz4Values()
	f.Add(hadoopFrames(f, raw, 1), uint16(len(raw)))
	f.Add(hadoopFrames(f, raw, 3), uint16(len(raw)))
	f.Add(lz4Block(f, raw), uint16(len(raw)))
	f.Fuzz(func(t *testing.T, src []byte, size uint16) {
		buf := make([]byte, int(size)+8)
		for i := range buf {
			buf[i] = 0xa5
		}
		n, err := DecodeLZ4(buf[:size:size], src)
		if err == nil && (n < 0 || n > int(size)) {
			t.Fatalf("%d bytes decoded into %d", n, size)
		}
		for _, b := range buf[size:] {
			if b != 0xa5 {
				t.Fatal("written past the buffer")
			}
		}
	})
}
