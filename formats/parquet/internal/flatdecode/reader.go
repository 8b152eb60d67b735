package flatdecode

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/sluicedata/sluice/formats/parquet/internal/bufpool"
	"github.com/sluicedata/sluice/formats/parquet/internal/thrift"
	"github.com/sluicedata/sluice/internal/unzeroed"
)

// Physical is a Parquet physical type, numbered as parquet.thrift numbers
// Type.
type Physical int

// The physical types the decoder reads.
const (
	Boolean   Physical = 0
	Int32     Physical = 1
	Int64     Physical = 2
	Float     Physical = 4
	Double    Physical = 5
	ByteArray Physical = 6
	// FixedLenByteArray values are as wide as the Arrow type says
	// (fixed_size_binary, or an extension over it such as arrow.uuid),
	// which is the column's type_length wherever arrow-go made the type.
	FixedLenByteArray Physical = 7
)

// Column describes one column chunk to decode.
type Column struct {
	// Name and Offset (the chunk's first byte in the file) are what errors
	// name.
	Name   string
	Offset int64
	// Physical is the column's physical type and Type the Arrow type its
	// arrays are to have: Supports says which pairs the decoder builds.
	Physical Physical
	Type     arrow.DataType
	// Optional is a maximum definition level of 1 (else 0).
	Optional bool
	Codec    Codec
	// Values is the chunk's num_values and Rows its row group's num_rows:
	// for a flat column they are equal, or the chunk is not taken on.
	Values, Rows int64
	// MaxPage bounds the uncompressed size of a page (the chunk's
	// total_uncompressed_size is one): a chunk with a page header that
	// claims more is not taken on, rather than allocated for. At most 1 GiB.
	MaxPage int64
}

// ErrUnsupported is what Open returns (wrapped, with the reason) for a
// chunk it does not take on.
var ErrUnsupported = errors.New("flatdecode: not a chunk this decoder reads")

// Supports reports whether arrays of type t are built from values of
// physical type p, as arrow-go builds them: the same bits, or (INT32 into
// 8- and 16-bit integers) truncated as a Go conversion truncates. Dictionary
// types are not, nor extension types but those over fixed_size_binary
// (arrow.uuid), whose arrays are their storage's bytes.
func Supports(p Physical, t arrow.DataType) bool {
	_, ok := widthOf(p, t)
	return ok
}

// widthOf is the bytes per value of t's data buffer (per offset, for
// strings and binaries).
func widthOf(p Physical, t arrow.DataType) (int, bool) {
	switch p {
	case Boolean:
		return 0, t.ID() == arrow.BOOL
	case Int32:
		switch t.ID() {
		case arrow.INT32, arrow.UINT32, arrow.DATE32, arrow.TIME32:
			return 4, true
		case arrow.INT16, arrow.UINT16:
			return 2, true
		case arrow.INT8, arrow.UINT8:
			return 1, true
		}
	case Int64:
		switch t.ID() {
		case arrow.INT64, arrow.UINT64, arrow.TIME64:
			return 8, true
		case arrow.TIMESTAMP:
			switch t.(*arrow.TimestampType).Unit {
			case arrow.Millisecond, arrow.Microsecond, arrow.Nanosecond:
				return 8, true
			}
		}
	case Float:
		return 4, t.ID() == arrow.FLOAT32
	case Double:
		return 8, t.ID() == arrow.FLOAT64
	case ByteArray:
		switch t.ID() {
		case arrow.STRING, arrow.BINARY:
			return 4, true
		case arrow.LARGE_STRING, arrow.LARGE_BINARY:
			return 8, true
		}
	case FixedLenByteArray:
		if ext, ok := t.(arrow.ExtensionType); ok {
			t = ext.StorageType()
		}
		if fsb, ok := t.(*arrow.FixedSizeBinaryType); ok && fsb.ByteWidth > 0 {
			return fsb.ByteWidth, true
		}
	}
	return 0, false
}

// physWidth is the bytes of a PLAIN fixed-width value of p.
func physWidth(p Physical) int {
	switch p {
	case Int32, Float:
		return 4
	case Int64, Double:
		return 8
	}
	return 0
}

// encodes reports whether the decoder reads values of p in encoding enc.
func encodes(p Physical, enc int64) bool {
	switch enc {
	case encPlain:
		return true
	case encPlainDictionary, encRLEDictionary:
		return p != Boolean
	case encRLE:
		return p == Boolean
	case encDeltaBinaryPacked:
		return p == Int32 || p == Int64
	case encDeltaLength:
		return p == ByteArray
	case encDeltaByteArray:
		return p == ByteArray || p == FixedLenByteArray
	case encByteStreamSplit:
		return p == Int32 || p == Int64 || p == Float || p == Double || p == FixedLenByteArray
	}
	return false
}

// pageRef is a data page of the chunk: its header and where its body
// starts.
type pageRef struct {
	h     thrift.PageHeader
	at    int64  // the header's offset in the file
	body  []byte // compressed
	index int    // the page's number in the chunk, dictionary included
	// shared, if set, holds the page's decompressed body for every
	// Reader of the fetch (Page.Shared).
	shared *Bodies
}

// dictionary is a chunk's decoded dictionary page.
type dictionary struct {
	count int
	fixed []byte // count values of the physical width
	// Byte arrays: entry i is data[offs[i]+4 : offs[i+1]], data being the
	// page (each entry's length before it).
	offs []uint32
	data []byte
	utf8 bool // strings: every entry is valid UTF-8
	// compact is the byte arrays end to end, once compactDictionary has
	// made it.
	compact []byte
}

// Reader decodes one column chunk, a batch of rows at a time.
type Reader struct {
	col   Column
	mem   memory.Allocator
	pages []pageRef
	next  int   // the next page to load
	left  int64 // rows not yet read
	width int   // of the Arrow data buffer's values (offsets for byte arrays)
	pw    int   // of a PLAIN fixed-width value
	dict  dictionary

	// While pages are taken on: whether the dictionary was, and the
	// values of the data pages.
	hasDict bool
	seen    int64
	// skipDict: no data page taken on is dictionary-encoded, so the
	// dictionary page is checked but not decoded.
	skipDict bool

	cur page

	// strings: the column's values are to be UTF-8, and validUTF8 says
	// whether those of the last batch are known to be.
	strings, validUTF8 bool

	// Scratch, kept between batches.
	free, held [][]byte // decompression buffers; held: in use by this batch
	dictBuf    []byte   // the one dict.fixed lies in, if any
	// lent: arrays hold parts of dictBuf (see dictionaryStretch), which
	// is then the garbage collector's to free, not bufpool's to hand on,
	// or dictPage's to hand back (byte arrays lend a copy instead, and
	// dictBuf stays the Reader's).
	// unlent: a batch's indices were not a stretch of the dictionary, and
	// the chunk's later batches are not looked at for one.
	lent, unlent bool
	lentTo       int // the dictionary entries before it have been lent
	// lend is what dictionaryStretch may lend batches for mem; where
	// they are the pipeline's alone (unzeroed.Return), dictPage holds
	// dictBuf and compactPage dict.compact for bufpool until the Reader
	// and every batch made of them are released.
	lend                  unzeroed.Lending
	dictPage, compactPage *lentPage
	work
}

// work is a Reader's scratch, kept between batches and, through works,
// handed from a released Reader to the next.
type work struct {
	valid    []byte // the current page's validity bits
	scratch  []byte
	u32      []uint32
	u64      []uint64
	lens     []int64
	pageLens []int64 // DELTA_(LENGTH_)BYTE_ARRAY: the current page's lengths
	prefixes []int64 // DELTA_BYTE_ARRAY
	idx      []uint32
	segs     []segment
	dictOffs []uint32 // the dictionary's offs
}

var works sync.Pool // of *work

// page is the state of the page being read.
type page struct {
	ref      pageRef
	rows     int // rows (levels) in the page
	pos      int // rows taken
	nonNull  int // values in the page
	taken    int // values taken
	values   []byte
	buf      []byte // the decompression buffer that holds values, if any
	built    []byte // DELTA_BYTE_ARRAY: the buffer its values were built in
	plainPos int    // PLAIN: the next value's byte (bit, for booleans)
	hy       hybrid
	dl       delta
	lenPos   int // DELTA_(LENGTH_)BYTE_ARRAY: the next value's in Reader.pageLens
}

// segment is a run of byte-array values of one page taken into a batch,
// copied once the batch's total size is known.
type segment struct {
	data     []byte // PLAIN: the page's values
	from, n  int    // PLAIN: byte offset of the first; dictionary: index into idx
	fromDict bool
	// bytes is the size of the values of a DELTA_LENGTH_BYTE_ARRAY page,
	// which lie end to end at data[from:], and lens their lengths' place
	// in Reader.lens; -1 for other segments.
	bytes, lens int
}

// Open checks the page headers of chunk (the whole column chunk) and
// returns a Reader for it, or an error wrapping ErrUnsupported if any part
// of it is not of a shape the decoder reads: the chunk is then arrow-go's
// to decode. The dictionary, if any, is decoded here.
func Open(chunk []byte, col Column, mem memory.Allocator) (*Reader, error) {
	r, err := newReader(col, mem)
	if err != nil {
		return nil, err
	}
	for at, index := 0, 0; r.seen < col.Values; index++ {
		if at >= len(chunk) {
			return nil, r.unsupported("the chunk ends after %d of its %d values", r.seen, col.Values)
		}
		h, err := parseHeader(chunk[at:])
		if err != nil {
			return nil, r.unsupported("page %d: header: %v", index, err)
		}
		body := at + h.Size
		if h.Compressed < 0 || h.Compressed > int64(len(chunk)-body) {
			return nil, r.unsupported("page %d: sizes %d compressed, %d uncompressed", index, h.Compressed, h.Uncompressed)
		}
		if err := r.add(pageRef{h: h, at: col.Offset + int64(at), body: chunk[body : body+int(h.Compressed)], index: index}); err != nil {
			return nil, err
		}
		at = body + int(h.Compressed)
	}
	return r, r.end()
}

// Page is one page of a column chunk fetched by itself.
type Page struct {
	// Offset is the page's first byte (its header's) in the file, and
	// Index its number in the chunk, the dictionary page counted: what
	// errors name.
	Offset int64
	Index  int
	// Bytes are the page, header and body, no more.
	Bytes []byte
	// Shared, if set, is where the page's decompressed body is shared
	// with other Readers that read part of it (see Bodies).
	Shared *Bodies
}

// OpenPages returns a Reader for some pages of a column chunk, fetched one
// by one: the dictionary page, if the chunk has one, then data pages that
// follow each other. col.Values and col.Rows are the rows those pages hold,
// which the Reader reads from the first page's first row. As Open, it
// refuses (ErrUnsupported) any page not of a shape the decoder reads.
//
// The dictionary page is decoded only where one of the data pages is
// dictionary-encoded. Writers fall back from a dictionary that grew past
// its bound (pyarrow's and arrow-go's of 1 MiB) to PLAIN pages for the
// rest of the chunk, so most reads of a few pages of a large row group
// need none of it, and decoding it for each would cost a page or more.
func OpenPages(pages []Page, col Column, mem memory.Allocator) (*Reader, error) {
	r, err := newReader(col, mem)
	if err != nil {
		return nil, err
	}
	refs := make([]pageRef, len(pages))
	for i, p := range pages {
		h, err := parseHeader(p.Bytes)
		if err != nil {
			return nil, r.unsupported("page %d: header: %v", p.Index, err)
		}
		if h.Compressed < 0 || h.Compressed != int64(len(p.Bytes)-h.Size) {
			return nil, r.unsupported("page %d: %d bytes compressed in a page of %d", p.Index, h.Compressed, len(p.Bytes))
		}
		refs[i] = pageRef{h: h, at: p.Offset, body: p.Bytes[h.Size:], index: p.Index, shared: p.Shared}
	}
	r.skipDict = !slices.ContainsFunc(refs, func(ref pageRef) bool {
		data := ref.h.Type == thrift.PageData || ref.h.Type == thrift.PageDataV2
		return data && (ref.h.Encoding == encPlainDictionary || ref.h.Encoding == encRLEDictionary)
	})
	for _, ref := range refs {
		if err := r.add(ref); err != nil {
			return nil, err
		}
	}
	return r, r.end()
}

// newReader checks what col says of the chunk and returns a Reader with
// no pages yet.
func newReader(col Column, mem memory.Allocator) (*Reader, error) {
	r := &Reader{col: col, mem: mem, left: col.Rows, lend: unzeroed.LendingTo(mem)}
	if w, ok := works.Get().(*work); ok {
		r.work = *w
	}
	w, ok := widthOf(col.Physical, col.Type)
	if !ok {
		return nil, r.unsupported("%s from physical type %d", col.Type, col.Physical)
	}
	if !col.Codec.Known() {
		return nil, r.unsupported("compression codec %d", col.Codec)
	}
	if col.Values != col.Rows || col.Rows < 0 {
		return nil, r.unsupported("%d values in %d rows", col.Values, col.Rows)
	}
	r.width, r.pw = w, physWidth(col.Physical)
	if col.Physical == FixedLenByteArray {
		r.pw = w
	}
	r.strings = col.Type.ID() == arrow.STRING || col.Type.ID() == arrow.LARGE_STRING
	return r, nil
}

// unsupported is Open's error for a chunk it leaves to arrow-go.
func (r *Reader) unsupported(format string, args ...any) error {
	return fmt.Errorf("%w: column %q: %s", ErrUnsupported, r.col.Name, fmt.Sprintf(format, args...))
}

// add takes on the chunk's next page, the dictionary decoded now, or
// refuses it.
func (r *Reader) add(ref pageRef) error {
	h, index := ref.h, ref.index
	if h.Uncompressed < 0 || h.Uncompressed > min(r.col.MaxPage, maxPage) {
		return r.unsupported("page %d: sizes %d compressed, %d uncompressed", index, h.Compressed, h.Uncompressed)
	}
	switch h.Type {
	case thrift.PageDictionary:
		if r.hasDict || len(r.pages) > 0 || !h.HasDict || r.col.Physical == Boolean || (h.Encoding != encPlain && h.Encoding != encPlainDictionary) || h.Values < 0 {
			return r.unsupported("page %d: a dictionary page of a kind not read", index)
		}
		r.hasDict = true
		if r.skipDict {
			return nil // no page to read needs it (OpenPages)
		}
		if err := r.readDictionary(ref); err != nil {
			return r.unsupported("page %d: dictionary: %v", index, err)
		}
	case thrift.PageData:
		if !h.HasData || h.Values < 0 || !encodes(r.col.Physical, h.Encoding) || (r.col.Optional && h.DefEnc != encRLE) {
			return r.unsupported("page %d: a DATA_PAGE of a kind not read", index)
		}
	case thrift.PageDataV2:
		if !h.HasV2 || h.Values < 0 || h.Rows != h.Values || h.RepLen != 0 || h.DefLen < 0 || h.DefLen > h.Compressed || h.DefLen > h.Uncompressed || !encodes(r.col.Physical, h.Encoding) {
			return r.unsupported("page %d: a DATA_PAGE_V2 of a kind not read", index)
		}
	default:
		// Index pages and pages of kinds to come: arrow-go skips them.
		return nil
	}
	if h.Type == thrift.PageData || h.Type == thrift.PageDataV2 {
		if (h.Encoding == encPlainDictionary || h.Encoding == encRLEDictionary) && !r.hasDict {
			return r.unsupported("page %d: dictionary indices without a dictionary", index)
		}
		r.seen += h.Values
		r.pages = append(r.pages, ref)
	}
	return nil
}

// end checks that the pages taken on hold the chunk's values.
func (r *Reader) end() error {
	if r.seen != r.col.Values {
		return r.unsupported("pages of %d values in a chunk of %d", r.seen, r.col.Values)
	}
	return nil
}

// Waits reports whether reading the next n rows (Next or Skip) would wait
// for another Reader of the fetch to decompress a page it takes (see
// Bodies). It only orders work: reading gives the same values either way.
func (r *Reader) Waits(n int64) bool {
	n -= int64(r.cur.rows - r.cur.pos)
	for i := r.next; n > 0 && i < len(r.pages); i++ {
		ref := r.pages[i]
		if ref.shared != nil && ref.shared.making(ref.at) {
			return true
		}
		n -= ref.h.Values
	}
	return false
}

// Rows is how many rows are left to read.
func (r *Reader) Rows() int64 { return r.left }

// Type is the Arrow type of the arrays Next builds (Column.Type).
func (r *Reader) Type() arrow.DataType { return r.col.Type }

// pageErr names the column and page of a decoding error.
func (r *Reader) pageErr(ref pageRef, err error) error {
	return fmt.Errorf("column %q: page %d at byte %d: %w", r.col.Name, ref.index, ref.at, err)
}

// buffer returns a decompression buffer of n bytes, held until the batch
// ends. Released Readers hand theirs on to later ones (bufpool): a read
// opens a Reader per column chunk, and each would otherwise allocate its
// pages' buffers anew.
func (r *Reader) buffer(n int) []byte {
	for i, b := range r.free {
		if cap(b) >= n {
			r.free[i] = r.free[len(r.free)-1]
			r.free = r.free[:len(r.free)-1]
			return b[:n]
		}
	}
	return bufpool.Get(n)
}

// Release hands the Reader's decompression buffers on to later Readers.
// The arrays it built do not share them; the Reader is not to be used
// again.
func (r *Reader) Release() {
	keep := func(b []byte) {
		if cap(b) > 0 {
			bufpool.Put(b)
		}
	}
	for _, b := range r.free {
		keep(b)
	}
	for _, b := range r.held {
		keep(b)
	}
	keep(r.cur.buf)
	keep(r.cur.built)
	switch {
	case r.dictPage != nil:
		r.dictPage.drop()
	case !r.lent:
		keep(r.dictBuf)
	}
	if r.compactPage != nil {
		r.compactPage.drop()
	}
	r.free, r.held, r.cur, r.dictBuf, r.dict, r.pages = nil, nil, page{}, nil, dictionary{}, nil
	r.dictPage, r.compactPage = nil, nil
	w := r.work
	clear(w.segs[:cap(w.segs)]) // they point into the pages
	w.lens, w.idx, w.segs = w.lens[:0], w.idx[:0], w.segs[:0]
	r.work = work{}
	works.Put(&w)
}

// body returns the page's uncompressed bytes from raw, compressed as the
// chunk is (compressed false: not at all).
func (r *Reader) body(raw []byte, size int64, compressed bool) ([]byte, []byte, error) {
	if !compressed || r.col.Codec == Uncompressed {
		if int64(len(raw)) != size {
			return nil, nil, fmt.Errorf("%d bytes where the header says %d", len(raw), size)
		}
		return raw, nil, nil
	}
	buf := r.buffer(int(size))
	if err := decompress(r.col.Codec, buf, raw); err != nil {
		r.free = append(r.free, buf)
		return nil, nil, err
	}
	return buf, buf, nil
}

// pageBody is body for a data page: from ref.shared where the page's body
// is shared, a buffer the Reader then does not own (nil, as for a page
// stored uncompressed).
func (r *Reader) pageBody(ref pageRef, raw []byte, size int64, compressed bool) ([]byte, []byte, error) {
	if ref.shared == nil || !compressed || r.col.Codec == Uncompressed {
		data, buf, err := r.body(raw, size, compressed)
		if buf != nil {
			decompressedPages.Add(1)
		}
		return data, buf, err
	}
	data, err := ref.shared.body(ref.at, func() ([]byte, error) {
		decompressedPages.Add(1)
		buf := bufpool.Get(int(size))
		if err := decompress(r.col.Codec, buf, raw); err != nil {
			bufpool.Put(buf)
			return nil, err
		}
		return buf, nil
	})
	return data, nil, err
}

// readDictionary decodes the dictionary page ref. Byte arrays are not
// copied out of the page: entry i is the page's bytes between offs[i]+4 (past
// its length) and offs[i+1], gathered from there into each batch.
func (r *Reader) readDictionary(ref pageRef) error {
	decodedDictionaries.Add(1)
	h := ref.h
	data, buf, err := r.body(ref.body, h.Uncompressed, true)
	if err != nil {
		return err
	}
	if buf == nil {
		// The chunk's bytes are not the reader's to keep, nor to hand on
		// to later readers as a buffer of their own.
		buf = r.buffer(len(data))
		copy(buf, data)
		data = buf
	}
	r.dictBuf = buf
	n := int(h.Values)
	r.dict.count = n
	if r.col.Physical != ByteArray {
		if n > len(data)/r.pw {
			return fmt.Errorf("%d values in %d bytes", n, len(data))
		}
		r.dict.fixed = data[:n*r.pw]
		return nil
	}
	if n > len(data)/4 {
		return fmt.Errorf("%d values in %d bytes", n, len(data))
	}
	r.dictOffs = grow(r.dictOffs, n+1)
	offs := r.dictOffs
	pos := 0
	var lenBits uint32 // the lengths' bits, or-ed
	for i := range n {
		if len(data)-pos < 4 {
			return errRunPastEnd
		}
		l := binary.LittleEndian.Uint32(data[pos:])
		if uint64(l) > uint64(len(data)-pos-4) {
			return errRunPastEnd
		}
		lenBits |= l
		offs[i] = uint32(pos)
		pos += 4 + int(l)
	}
	offs[n] = uint32(pos)
	r.dict.offs, r.dict.data = offs, data
	// The entries are checked once here, rather than each time a batch
	// takes one.
	r.dict.utf8 = r.strings && validEntries(data[:pos], offs, lenBits&0x80808080 == 0)
	return nil
}

// validEntries reports whether each dictionary entry of data is valid
// UTF-8. asciiLengths says that every byte of the entries' lengths is
// ASCII: no character can then run across one, and the entries are all
// valid if the page is, checked in one pass (one call per entry costs
// several times as much for short strings).
func validEntries(data []byte, offs []uint32, asciiLengths bool) bool {
	if asciiLengths {
		return utf8.Valid(data)
	}
	for i := range len(offs) - 1 {
		if !utf8.Valid(data[offs[i]+4 : offs[i+1]]) {
			return false
		}
	}
	return true
}

// ValidUTF8 reports whether the values of the array Next last returned are
// all known to be valid UTF-8: taken from a dictionary whose entries are,
// or PLAIN values checked as they were copied. false says they were not
// all checked (not strings, a dictionary with an entry that is not UTF-8,
// or a PLAIN value that is not), and the caller is to look at them.
func (r *Reader) ValidUTF8() bool { return r.validUTF8 }
