package flatdecode

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"sync/atomic"
	"unicode/utf8"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/sluicedata/sluice/formats/parquet/internal/bufpool"
	"github.com/sluicedata/sluice/formats/parquet/internal/thrift"
	"github.com/sluicedata/sluice/internal/unzeroed"
)

// loadPage makes the next data page the current one: decompressed, its
// definition levels turned into validity bits, its values' decoder set up.
func (r *Reader) loadPage() error {
	r.hold()
	if r.next >= len(r.pages) {
		return fmt.Errorf("column %q: the pages end %d rows before the row group", r.col.Name, r.left)
	}
	ref := r.pages[r.next]
	r.next++
	r.cur = page{ref: ref, rows: int(ref.h.Values)}
	if err := r.setUp(ref); err != nil {
		return r.pageErr(ref, err)
	}
	return nil
}

// hold keeps the current page's buffers until the batch ends, the page
// being left: the batch's segments may lie in them.
func (r *Reader) hold() {
	for _, b := range [][]byte{r.cur.buf, r.cur.built} {
		if b != nil {
			r.held = append(r.held, b)
		}
	}
}

func (r *Reader) setUp(ref pageRef) error {
	h := ref.h
	raw := ref.body
	var levels, values []byte
	if h.Type == thrift.PageDataV2 {
		levels = raw[:h.DefLen]
		v, buf, err := r.pageBody(ref, raw[h.DefLen:], h.Uncompressed-h.DefLen, h.CompressedV2)
		if err != nil {
			return err
		}
		values, r.cur.buf = v, buf
	} else {
		body, buf, err := r.pageBody(ref, raw, h.Uncompressed, true)
		if err != nil {
			return err
		}
		r.cur.buf = buf
		values = body
		if r.col.Optional {
			if len(body) < 4 {
				return fmt.Errorf("definition levels: %w", errRunPastEnd)
			}
			n := binary.LittleEndian.Uint32(body)
			if uint64(n) > uint64(len(body)-4) {
				return fmt.Errorf("definition levels of %d bytes in a page of %d", n, len(body))
			}
			levels, values = body[4:4+n], body[4+n:]
		}
	}
	rows := r.cur.rows
	r.cur.nonNull = rows
	if r.col.Optional {
		r.valid = grow(r.valid, int(bitutil.BytesForBits(int64(rows))))
		n, err := levelsBitmap(levels, rows, r.valid)
		if err != nil {
			return err
		}
		r.cur.nonNull = n
	}
	r.cur.values = values
	return r.setUpValues(h.Encoding, values, r.cur.nonNull)
}

// setUpValues checks that values can hold n values of encoding enc and
// sets up their decoder.
func (r *Reader) setUpValues(enc int64, values []byte, n int) error {
	switch enc {
	case encPlain:
		switch r.col.Physical {
		case Boolean:
			if n > len(values)*8 {
				return fmt.Errorf("%d PLAIN booleans in %d bytes", n, len(values))
			}
		case ByteArray:
			if n > len(values)/4 {
				return fmt.Errorf("%d PLAIN byte arrays in %d bytes", n, len(values))
			}
		default:
			if n > len(values)/r.pw {
				return fmt.Errorf("%d PLAIN values in %d bytes", n, len(values))
			}
		}
	case encByteStreamSplit:
		if len(values) != n*r.pw {
			return fmt.Errorf("%d BYTE_STREAM_SPLIT values in %d bytes", n, len(values))
		}
	case encDeltaBinaryPacked:
		if err := r.cur.dl.init(values, uint(r.pw*8)); err != nil {
			return err
		}
		if r.cur.dl.left < n {
			return fmt.Errorf("%d DELTA_BINARY_PACKED values for %d", r.cur.dl.left, n)
		}
	case encDeltaLength:
		at, err := r.setUpLengths(values, n)
		r.cur.plainPos, r.cur.lenPos = at, 0
		return err
	case encDeltaByteArray:
		return r.setUpPrefixed(values, n)
	case encPlainDictionary, encRLEDictionary:
		if n == 0 {
			return nil
		}
		if len(values) == 0 || values[0] > 32 {
			return fmt.Errorf("dictionary indices without a bit width of at most 32")
		}
		r.cur.hy = hybrid{data: values[1:], width: uint(values[0])}
	case encRLE: // booleans
		if n == 0 {
			return nil
		}
		if len(values) < 4 {
			return errRunPastEnd
		}
		l := binary.LittleEndian.Uint32(values)
		if uint64(l) > uint64(len(values)-4) {
			return fmt.Errorf("RLE booleans of %d bytes in %d", l, len(values)-4)
		}
		r.cur.hy = hybrid{data: values[4 : 4+l], width: 1}
	default:
		return fmt.Errorf("encoding %d", enc)
	}
	return nil
}

// setUpLengths decodes the lengths of a DELTA_LENGTH_BYTE_ARRAY page of n
// values into pageLens, checks that the bytes after them hold them, and
// returns where those bytes start.
func (r *Reader) setUpLengths(values []byte, n int) (int, error) {
	if err := r.deltas(values, n, &r.pageLens); err != nil {
		return 0, err
	}
	at := r.cur.dl.pos
	room := int64(len(values) - at)
	for _, l := range r.pageLens {
		if l > room {
			return 0, fmt.Errorf("DELTA_LENGTH_BYTE_ARRAY value of %d bytes where %d are left", l, room)
		}
		room -= l
	}
	return at, nil
}

// deltas decodes the n DELTA_BINARY_PACKED lengths at the start of
// values into *out, checking that none is negative; r.cur.dl.pos is then
// where they end.
func (r *Reader) deltas(values []byte, n int, out *[]int64) error {
	c := &r.cur
	if err := c.dl.init(values, 32); err != nil {
		return err
	}
	if c.dl.left != n {
		return fmt.Errorf("%d delta-encoded lengths for %d values", c.dl.left, n)
	}
	r.u64 = grow(r.u64, n)
	if err := c.dl.next(r.u64); err != nil {
		return err
	}
	if c.dl.pos > len(values) {
		// The last miniblock is padded to its full size, which is where
		// the bytes after the lengths start: a page whose values end
		// inside it is cut short.
		return fmt.Errorf("delta-encoded lengths: %w", errRunPastEnd)
	}
	*out = grow(*out, n)
	for i, v := range r.u64 {
		l := int64(int32(uint32(v)))
		if l < 0 {
			return fmt.Errorf("a length of %d bytes", l)
		}
		(*out)[i] = l
	}
	return nil
}

// maxBuilt bounds the bytes a DELTA_BYTE_ARRAY page's values may take once
// built: shared prefixes let a small page claim far more.
const maxBuilt = 1 << 30

// setUpPrefixed builds the n values of a DELTA_BYTE_ARRAY page (each the
// first prefix bytes of the one before, then a suffix of its own) end to
// end in a buffer of their own, which is then read as a
// DELTA_LENGTH_BYTE_ARRAY page's bytes are (FIXED_LEN_BYTE_ARRAY: as PLAIN
// values, each checked to be of the column's width).
func (r *Reader) setUpPrefixed(values []byte, n int) error {
	c := &r.cur
	if err := r.deltas(values, n, &r.prefixes); err != nil {
		return fmt.Errorf("prefix lengths: %w", err)
	}
	suffixes := values[c.dl.pos:]
	at, err := r.setUpLengths(suffixes, n)
	if err != nil {
		return fmt.Errorf("suffixes: %w", err)
	}
	fixed := r.col.Physical == FixedLenByteArray
	var total, prev int64
	for i, p := range r.prefixes {
		if p > prev {
			return fmt.Errorf("value %d: a prefix of %d bytes of a value of %d", i, p, prev)
		}
		prev = p + r.pageLens[i]
		if fixed && prev != int64(r.pw) {
			return fmt.Errorf("value %d: %d bytes in a FIXED_LEN_BYTE_ARRAY(%d) column", i, prev, r.pw)
		}
		if total += prev; total > maxBuilt {
			return fmt.Errorf("DELTA_BYTE_ARRAY values of more than %d bytes", maxBuilt)
		}
	}
	buf := r.buffer(int(total))
	c.built = buf
	buildPrefixed(buf, r.prefixes, r.pageLens, suffixes[at:])
	c.values, c.plainPos, c.lenPos = buf, 0, 0
	return nil
}

// buildPrefixed writes DELTA_BYTE_ARRAY values end to end into buf (their
// exact size): value i is the first prefixes[i] bytes of value i-1, then
// the next lens[i] bytes of suffixes. lens[i] becomes value i's length.
//
// Short prefixes and suffixes move as 32 bytes (put). A prefix's 32 bytes
// may read past the value before into bytes this value is writing, but
// the bytes it keeps all lie before: a prefix is no longer than the value
// it comes from.
func buildPrefixed(buf []byte, prefixes, lens []int64, suffixes []byte) {
	pos, from, at := 0, 0, 0 // the value being built, the one before, the next suffix
	for i, p64 := range prefixes {
		p, l := int(p64), int(lens[i])
		put(buf, pos, buf, from, p)
		put(buf, pos+p, suffixes, at, l)
		at += l
		from = pos
		lens[i] = int64(p + l)
		pos += p + l
	}
}

func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// alloc returns a buffer of n bytes from the read's allocator, with no
// capacity past them.
func (r *Reader) alloc(n int) *memory.Buffer {
	if n == 0 {
		return memory.NewBufferBytes(nil)
	}
	var b []byte
	if u, ok := r.mem.(UnzeroedAllocator); ok {
		b = u.AllocateUnzeroed(n)
	} else {
		b = r.mem.Allocate(n)
	}
	return memory.NewBufferWithAllocator(b[:n:n], r.mem)
}

// UnzeroedAllocator is an allocator that can hand out a buffer without
// zeroing it first. Next sets every byte of each buffer it allocates (the
// bits past a bitmap's last row included), so where its allocator offers
// this, as a shuffled read's recycler does, it takes it: zeroing a buffer
// about to be written whole costs a shuffled read of numeric columns a few
// percent of its CPU.
type UnzeroedAllocator interface {
	AllocateUnzeroed(size int) []byte
}

// Next decodes the next n rows into an array of the column's type.
func (r *Reader) Next(n int) (arrow.Array, error) {
	if n < 0 || int64(n) > r.left {
		return nil, fmt.Errorf("column %q: %d rows asked for, %d left", r.col.Name, n, r.left)
	}
	r.validUTF8 = false
	var validity, data, offsets *memory.Buffer
	release := func() {
		for _, b := range []*memory.Buffer{validity, data, offsets} {
			if b != nil {
				b.Release()
			}
		}
	}
	var vbits []byte
	if r.col.Optional {
		validity = r.alloc(int(bitutil.BytesForBits(int64(n))))
		vbits = validity.Bytes()
		if len(vbits) > 0 {
			vbits[len(vbits)-1] = 0
		}
	}
	if bufs, err := r.dictionaryStretch(n, vbits); err != nil || bufs != nil {
		if err != nil {
			release()
			return nil, err
		}
		r.left -= int64(n)
		d := array.NewData(r.col.Type, n, append([]*memory.Buffer{validity}, bufs...), nil, 0, 0)
		release()
		for _, b := range bufs {
			b.Release()
		}
		defer d.Release()
		return array.MakeFromData(d), nil
	}
	switch r.col.Physical {
	case Boolean:
		data = r.alloc(int(bitutil.BytesForBits(int64(n))))
		if b := data.Bytes(); len(b) > 0 {
			b[len(b)-1] = 0
		}
	case ByteArray:
		offsets = r.alloc((n + 1) * r.width)
	default:
		data = r.alloc(n * r.width)
	}
	nonNull, err := r.fill(n, vbits, data, offsets)
	if err == nil && offsets != nil {
		data, err = r.copyBytes(nonNull)
	}
	r.free = append(r.free, r.held...)
	clear(r.held)
	r.held = r.held[:0]
	if err != nil {
		release()
		return nil, err
	}
	r.left -= int64(n)
	bufs := []*memory.Buffer{validity, data}
	if offsets != nil {
		bufs = []*memory.Buffer{validity, offsets, data}
	}
	d := array.NewData(r.col.Type, n, bufs, nil, n-nonNull, 0)
	release()
	defer d.Release()
	return array.MakeFromData(d), nil
}

// dictionaryStretch returns the buffers of the next n rows' values (after
// the validity bitmap's) as parts of the dictionary, where those values are
// its entries from some base on, in order, none null, in one data page:
// the batch then costs no gather and no buffer of its own. Writers build a
// dictionary in the order values first appear, so a column of distinct
// values (ids, float features, unique strings) whose row group fits the
// dictionary page is encoded exactly so, as arrow-go and pyarrow write by
// default. Fixed-width values are the dictionary page's bytes; byte arrays
// a copy of the dictionary's entries without their lengths, made once for
// the chunk (compactDictionary), and offsets of the batch's own. What is
// lent is the collector's for good, or, where the batches are the
// pipeline's alone (unzeroed.Return), a lentPage's, back to bufpool once
// they are released.
//
// It returns nil, having taken nothing, for any other batch. The first
// batch of a chunk that is not such a stretch ends the looking, so that a
// chunk of repeated values reads at most one batch's indices twice (and
// mostly a few: hybrid.counts stops at the first that does not count up).
func (r *Reader) dictionaryStretch(n int, vbits []byte) ([]*memory.Buffer, error) {
	switch {
	case r.unlent || n == 0 || r.dict.count == 0 || r.lend == unzeroed.Copy:
		return nil, nil
	case r.col.Physical == ByteArray:
		if r.strings && !r.dict.utf8 {
			return nil, nil // each value is to be looked at
		}
	case r.dict.fixed == nil || r.width != r.pw:
		return nil, nil
	}
	c := &r.cur
	for c.pos == c.rows && r.next < len(r.pages) {
		if err := r.loadPage(); err != nil {
			return nil, err
		}
	}
	if enc := c.ref.h.Encoding; enc != encPlainDictionary && enc != encRLEDictionary {
		return nil, nil
	}
	if c.rows-c.pos < n || c.nonNull-c.taken < n || (vbits != nil && bitutil.CountSetBits(r.valid, c.pos, n) != n) {
		return nil, nil
	}
	saved := c.hy
	r.u32 = grow(r.u32, 1)
	if err := c.hy.next(r.u32); err != nil {
		// fill reports it, from the page as it was.
		c.hy, r.unlent = saved, true
		return nil, nil
	}
	base := int(r.u32[0])
	if ok, err := c.hy.counts(n-1, uint32(base+1)); !ok || err != nil {
		c.hy, r.unlent = saved, true
		return nil, nil
	}
	if base < r.lentTo || base+n > r.dict.count {
		// Entries lent before are not lent again: no two batches share a
		// value's bytes, which a user may write to in place.
		c.hy, r.unlent = saved, true
		return nil, nil
	}
	r.lentTo = base + n
	if vbits != nil {
		bitutil.CopyBitmap(r.valid, c.pos, n, vbits, 0)
	}
	c.pos += n
	c.taken += n
	lentBatches.Add(1)
	if r.col.Physical != ByteArray {
		pw := r.pw
		vals := r.dict.fixed[base*pw : (base+n)*pw : (base+n)*pw]
		if r.lend == unzeroed.Return {
			if r.dictPage == nil {
				r.dictPage, r.lent = newLentPage(r.dictBuf), true
			}
			return []*memory.Buffer{r.dictPage.lend(vals)}, nil
		}
		if !r.lent {
			r.lent = true
			bufpool.Forget(r.dictBuf)
		}
		return []*memory.Buffer{memory.NewBufferBytes(vals)}, nil
	}
	r.validUTF8 = r.strings
	// Entry j starts at src[j]+4 in the page, and at src[j]-4j once the
	// lengths before it are left out.
	src, w := r.dict.offs, r.width
	start := int64(src[base]) - 4*int64(base)
	offsets := r.alloc((n + 1) * w)
	offs := offsets.Bytes()
	for i := range n + 1 {
		r.putOffset(offs, i, int64(src[base+i])-4*int64(base+i)-start)
	}
	end := start + int64(src[base+n]) - int64(src[base]) - 4*int64(n)
	data := r.compactDictionary()[start:end:end]
	if r.compactPage != nil {
		return []*memory.Buffer{offsets, r.compactPage.lend(data)}, nil
	}
	return []*memory.Buffer{offsets, memory.NewBufferBytes(data)}, nil
}

// compactDictionary returns the byte-array dictionary's entries end to end
// (the page holds each after its length), made on first need. Batches
// lend parts of it, which is the garbage collector's to free, or, where
// the batches are the pipeline's alone, bufpool's once they and the
// Reader are released (compactPage).
func (r *Reader) compactDictionary() []byte {
	if r.dict.compact != nil {
		return r.dict.compact
	}
	n, src := r.dict.count, r.dict.offs
	size := int(src[n]) - 4*n
	var data []byte
	if r.lend == unzeroed.Return {
		data = bufpool.Get(size)
		r.compactPage = newLentPage(data)
	} else {
		data = unzeroed.Bytes(size)
	}
	at, page := 0, r.dict.data
	for i := range n {
		from := int(src[i]) + 4
		l := int(src[i+1]) - from
		put(data, at, page, from, l)
		at += l
	}
	r.dict.compact = data
	return data
}

// lentBatches counts the batches dictionaryStretch built, for the tests
// that check the comparison with arrow-go covers them.
var lentBatches atomic.Int64

// LentBatches is how many batches were built of dictionary bytes.
func LentBatches() int64 { return lentBatches.Load() }

// fill decodes n rows, page by page, into the batch's buffers and returns
// how many are not null.
func (r *Reader) fill(n int, vbits []byte, data, offsets *memory.Buffer) (int, error) {
	r.lens, r.idx, r.segs = r.lens[:0], r.idx[:0], r.segs[:0]
	var total int64 // byte arrays: the batch's bytes so far
	if offsets != nil {
		r.putOffset(offsets.Bytes(), 0, 0)
	}
	nonNull := 0
	for row := 0; row < n; {
		if r.cur.pos == r.cur.rows {
			if err := r.loadPage(); err != nil {
				return 0, err
			}
			continue
		}
		k := min(n-row, r.cur.rows-r.cur.pos)
		m := k
		if vbits != nil {
			bitutil.CopyBitmap(r.valid, r.cur.pos, k, vbits, row)
			m = bitutil.CountSetBits(vbits, row, k)
		}
		if m > r.cur.nonNull-r.cur.taken {
			return 0, r.pageErr(r.cur.ref, fmt.Errorf("more values than the page holds"))
		}
		var err error
		switch r.col.Physical {
		case Boolean:
			err = r.booleans(data.Bytes(), vbits, row, k, m)
		case ByteArray:
			total, err = r.byteLengths(offsets.Bytes(), vbits, row, k, m, total)
		default:
			err = r.fixed(data.Bytes(), vbits, row, k, m)
		}
		if err != nil {
			return 0, r.pageErr(r.cur.ref, err)
		}
		r.cur.pos += k
		r.cur.taken += m
		nonNull += m
		row += k
	}
	return nonNull, nil
}

// fixed decodes m values into the slots of rows [row, row+k) of out, the
// first m of them first, then spread over the rows that are not null.
func (r *Reader) fixed(out, vbits []byte, row, k, m int) error {
	w := r.width
	dst := out[row*w : (row+m)*w]
	if w != r.pw {
		r.scratch = grow(r.scratch, m*r.pw)
		dst = r.scratch
	}
	if err := r.physical(dst, m); err != nil {
		return err
	}
	if w != r.pw {
		narrow(out[row*w:(row+m)*w], w, dst)
	}
	if m < k {
		spread(out, w, vbits, row, k, m)
	}
	return nil
}

// physical decodes the page's next m values into dst, m of the physical
// width each.
func (r *Reader) physical(dst []byte, m int) error {
	pw, c := r.pw, &r.cur
	switch c.ref.h.Encoding {
	case encPlain:
		c.plainPos += copy(dst, c.values[c.plainPos:c.plainPos+m*pw])
	case encDeltaByteArray: // FIXED_LEN_BYTE_ARRAY: built end to end, each pw bytes
		c.plainPos += copy(dst, c.values[c.plainPos:c.plainPos+m*pw])
		c.lenPos += m
	case encByteStreamSplit:
		stride := c.nonNull
		for b := range pw {
			stream := c.values[b*stride+c.taken : b*stride+c.taken+m]
			for i, v := range stream {
				dst[i*pw+b] = v
			}
		}
	case encDeltaBinaryPacked:
		r.u64 = grow(r.u64, m)
		if err := c.dl.next(r.u64); err != nil {
			return err
		}
		if pw == 4 {
			for i, v := range r.u64 {
				binary.LittleEndian.PutUint32(dst[4*i:], uint32(v))
			}
		} else {
			for i, v := range r.u64 {
				binary.LittleEndian.PutUint64(dst[8*i:], v)
			}
		}
	default: // dictionary
		// A stretch of indices at a time, unpacked and used while they
		// are in the core's first cache.
		dict := r.dict.fixed[:r.dict.count*pw]
		for at := 0; at < m; at += indexStretch {
			k := min(indexStretch, m-at)
			r.u32 = grow(r.u32, k)
			if err := c.hy.next(r.u32); err != nil {
				return err
			}
			if bad := gatherFixed(dst[at*pw:(at+k)*pw], dict, r.u32, pw); bad >= 0 {
				return fmt.Errorf("dictionary index %d of %d values", r.u32[bad], r.dict.count)
			}
		}
	}
	return nil
}

// indexStretch is how many dictionary indices are unpacked at a time
// before their values are gathered: 16 KiB of them.
const indexStretch = 4096

// gatherFixed writes the dictionary values (of pw bytes) idx names to out,
// and returns -1, or the position of the first index past the dictionary's
// end (out is then written only up to there).
func gatherFixed(out, dict []byte, idx []uint32, pw int) int {
	switch {
	case pw == 8 && aligned(dict, 8) && aligned(out, 8):
		return gatherWords(arrow.Uint64Traits.CastFromBytes(out), arrow.Uint64Traits.CastFromBytes(dict), idx)
	case pw == 4 && aligned(dict, 4) && aligned(out, 4):
		return gatherWords(arrow.Uint32Traits.CastFromBytes(out), arrow.Uint32Traits.CastFromBytes(dict), idx)
	}
	return gatherBytes(out, dict, idx, pw)
}

// gatherWords is gatherFixed where both are word aligned, as they are
// where the dictionary is in a buffer of the reader's own (always, so far)
// and out in an allocator's. As machine words a value costs a third of what
// it does as bytes with their slice checks.
func gatherWords[W uint32 | uint64](out, dict []W, idx []uint32) int {
	out = out[:len(idx)]
	for i, ix := range idx {
		if int(ix) >= len(dict) {
			return i
		}
		out[i] = dict[ix]
	}
	return -1
}

// gatherBytes is gatherFixed anywhere, aligned or not.
func gatherBytes(out, dict []byte, idx []uint32, pw int) int {
	count := uint32(len(dict) / pw)
	for i, ix := range idx {
		if ix >= count {
			return i
		}
		switch pw {
		case 4:
			binary.LittleEndian.PutUint32(out[4*i:], binary.LittleEndian.Uint32(dict[4*ix:]))
		case 8:
			binary.LittleEndian.PutUint64(out[8*i:], binary.LittleEndian.Uint64(dict[8*ix:]))
		default: // FIXED_LEN_BYTE_ARRAY
			at := int(ix) * pw
			copy(out[i*pw:(i+1)*pw], dict[at:at+pw])
		}
	}
	return -1
}

// aligned reports whether b starts at a multiple of n bytes (a power of
// two), so that it can be read as n-byte words.
func aligned(b []byte, n uintptr) bool {
	return len(b) == 0 || uintptr(unsafe.Pointer(unsafe.SliceData(b)))&(n-1) == 0
}

// narrow writes INT32 values as w-byte integers, truncated.
func narrow(out []byte, w int, src []byte) {
	for i := range len(src) / 4 {
		v := binary.LittleEndian.Uint32(src[4*i:])
		if w == 1 {
			out[i] = byte(v)
		} else {
			binary.LittleEndian.PutUint16(out[2*i:], uint16(v))
		}
	}
}

// spread moves the m values at the start of rows [row, row+k) of out to
// the rows vbits marks valid, from the last back, and zeroes the null
// slots.
func spread(out []byte, w int, vbits []byte, row, k, m int) {
	rows := out[row*w : (row+k)*w]
	switch {
	case w == 8 && aligned(rows, 8):
		spreadWords(arrow.Uint64Traits.CastFromBytes(rows), vbits, row, m)
		return
	case w == 4 && aligned(rows, 4):
		spreadWords(arrow.Uint32Traits.CastFromBytes(rows), vbits, row, m)
		return
	}
	j := m - 1
	for i := k - 1; i > j; i-- {
		slot := out[(row+i)*w : (row+i+1)*w]
		if bitutil.BitIsSet(vbits, row+i) {
			copy(slot, out[(row+j)*w:(row+j+1)*w])
			j--
		} else {
			clear(slot)
		}
	}
}

// spreadWords is spread for values of one machine word, word aligned,
// out being rows [row, row+len(out)): a word's load and store, where a copy
// and a clear call per row cost several times the move (an optional int64
// or double column of few nulls moves nearly every value).
func spreadWords[W uint32 | uint64](out []W, vbits []byte, row, m int) {
	j := m - 1
	for i := len(out) - 1; i > j; i-- {
		var v W
		if bitutil.BitIsSet(vbits, row+i) {
			v = out[j]
			j--
		}
		out[i] = v
	}
}

// booleans decodes m booleans into the bits of rows [row, row+k) of out.
func (r *Reader) booleans(out, vbits []byte, row, k, m int) error {
	c := &r.cur
	r.scratch = grow(r.scratch, m)
	if c.ref.h.Encoding == encPlain {
		for i := range m {
			r.scratch[i] = (c.values[(c.plainPos+i)>>3] >> ((c.plainPos + i) & 7)) & 1
		}
		c.plainPos += m
	} else {
		r.u32 = grow(r.u32, m)
		if err := c.hy.next(r.u32); err != nil {
			return err
		}
		for i, v := range r.u32 {
			r.scratch[i] = byte(v)
		}
	}
	j := 0
	for i := range k {
		if vbits == nil || bitutil.BitIsSet(vbits, row+i) {
			bitutil.SetBitTo(out, row+i, r.scratch[j] != 0)
			j++
		} else {
			bitutil.ClearBit(out, row+i)
		}
	}
	return nil
}

// byteLengths takes m byte-array values for rows [row, row+k): their
// lengths give the rows' offsets, and a segment records where their bytes
// are, copied by copyBytes once the batch's total is known.
func (r *Reader) byteLengths(offs, vbits []byte, row, k, m int, total int64) (int64, error) {
	c := &r.cur
	first := len(r.lens)
	// Room for the m lengths (and indices) at once: appended from empty,
	// as a Reader's first batch starts, they would grow in doublings,
	// each copying what came before.
	r.lens = slices.Grow(r.lens, m)
	if c.ref.h.Encoding == encPlain {
		pos := c.plainPos
		for range m {
			if len(c.values)-pos < 4 {
				return 0, errRunPastEnd
			}
			l := int64(binary.LittleEndian.Uint32(c.values[pos:]))
			pos += 4
			if l > int64(len(c.values)-pos) {
				return 0, errRunPastEnd
			}
			r.lens = append(r.lens, l)
			pos += int(l)
		}
		r.segs = append(r.segs, segment{data: c.values, from: c.plainPos, n: m, bytes: -1})
		c.plainPos = pos
	} else if enc := c.ref.h.Encoding; enc == encDeltaLength || enc == encDeltaByteArray {
		size := 0
		for _, l := range r.pageLens[c.lenPos : c.lenPos+m] {
			size += int(l)
		}
		r.segs = append(r.segs, segment{data: c.values, from: c.plainPos, n: m, bytes: size, lens: len(r.lens)})
		r.lens = append(r.lens, r.pageLens[c.lenPos:c.lenPos+m]...)
		c.plainPos += size
		c.lenPos += m
	} else {
		r.segs = append(r.segs, segment{from: len(r.idx), n: m, fromDict: true, bytes: -1})
		r.idx = slices.Grow(r.idx, m)
		offs := r.dict.offs[:r.dict.count+1]
		for at := 0; at < m; at += indexStretch {
			r.u32 = grow(r.u32, min(indexStretch, m-at))
			if err := c.hy.next(r.u32); err != nil {
				return 0, err
			}
			for _, ix := range r.u32 {
				if int(ix) >= len(offs)-1 {
					return 0, fmt.Errorf("dictionary index %d of %d values", ix, r.dict.count)
				}
				r.lens = append(r.lens, int64(offs[ix+1]-offs[ix]-4))
			}
			r.idx = append(r.idx, r.u32...)
		}
	}
	lens := r.lens[first:]
	limit := int64(math.MaxInt64)
	if r.width == 4 {
		limit = math.MaxInt32
	}
	j := 0
	for i := range k {
		if vbits == nil || bitutil.BitIsSet(vbits, row+i) {
			total += lens[j]
			j++
		}
		if total > limit {
			return 0, fmt.Errorf("a batch's values exceed %d bytes", limit)
		}
		r.putOffset(offs, row+i+1, total)
	}
	return total, nil
}

func (r *Reader) putOffset(offs []byte, i int, v int64) {
	if r.width == 4 {
		binary.LittleEndian.PutUint32(offs[4*i:], uint32(v))
	} else {
		binary.LittleEndian.PutUint64(offs[8*i:], uint64(v))
	}
}

// copyBytes allocates the batch's value bytes and copies them in.
func (r *Reader) copyBytes(nonNull int) (*memory.Buffer, error) {
	var total int64
	for _, l := range r.lens[:nonNull] {
		total += l
	}
	buf := r.alloc(int(total))
	out := buf.Bytes()
	at := 0
	// Strings are checked here, in bulk while the bytes are in the cache:
	// those of a dictionary were checked when it was read.
	r.validUTF8 = r.strings
	for _, s := range r.segs {
		if s.fromDict {
			r.validUTF8 = r.validUTF8 && r.dict.utf8
			at = r.gather(out, at, r.idx[s.from:s.from+s.n])
			continue
		}
		if s.bytes >= 0 {
			first := at
			at += copy(out[at:], s.data[s.from:s.from+s.bytes])
			if r.validUTF8 {
				r.validUTF8 = startsWhole(out[first:at], r.lens[s.lens:s.lens+s.n]) && utf8.Valid(out[first:at])
			}
			continue
		}
		pos, first, cut := s.from, at, false
		for range s.n {
			l := int(binary.LittleEndian.Uint32(s.data[pos:]))
			from := pos + 4
			put(out, at, s.data, from, l)
			at += l
			// A value that starts inside a character.
			cut = cut || (l > 0 && !utf8.RuneStart(s.data[from]))
			pos = from + l
		}
		r.validUTF8 = r.validUTF8 && !cut && utf8.Valid(out[first:at])
	}
	return buf, nil
}

// gather copies the dictionary entries idx to out from at, end to end
// (put), and returns where they end.
func (r *Reader) gather(out []byte, at int, idx []uint32) int {
	data, offs := r.dict.data, r.dict.offs
	for _, ix := range idx {
		from := int(offs[ix]) + 4
		l := int(offs[ix+1]) - from
		put(out, at, data, from, l)
		at += l
	}
	return at
}

// startsWhole reports whether none of the values laid end to end in b,
// of lengths lens, starts on a UTF-8 continuation byte.
func startsWhole(b []byte, lens []int64) bool {
	at := 0
	for _, l := range lens {
		if l > 0 && !utf8.RuneStart(b[at]) {
			return false
		}
		at += int(l)
	}
	return true
}

// Skip passes over the next n rows without building them. Pages it passes
// over whole are not even decompressed.
func (r *Reader) Skip(n int64) error {
	if n < 0 || n > r.left {
		return fmt.Errorf("column %q: %d rows to skip, %d left", r.col.Name, n, r.left)
	}
	defer func() {
		r.free = append(r.free, r.held...)
		clear(r.held)
		r.held = r.held[:0]
	}()
	for n > 0 {
		if r.cur.pos == r.cur.rows {
			if r.next < len(r.pages) && r.pages[r.next].h.Values <= n {
				r.hold()
				ref := r.pages[r.next]
				r.next++
				r.cur = page{ref: ref, rows: int(ref.h.Values), pos: int(ref.h.Values)}
				n -= ref.h.Values
				r.left -= ref.h.Values
				continue
			}
			if err := r.loadPage(); err != nil {
				return err
			}
			continue
		}
		k := int(min(n, int64(r.cur.rows-r.cur.pos)))
		m := k
		if r.col.Optional {
			m = bitutil.CountSetBits(r.valid, r.cur.pos, k)
		}
		if m > r.cur.nonNull-r.cur.taken {
			return r.pageErr(r.cur.ref, fmt.Errorf("more values than the page holds"))
		}
		if err := r.skipValues(m); err != nil {
			return r.pageErr(r.cur.ref, err)
		}
		r.cur.pos += k
		r.cur.taken += m
		n -= int64(k)
		r.left -= int64(k)
	}
	return nil
}

// skipValues passes over the current page's next m values.
func (r *Reader) skipValues(m int) error {
	c := &r.cur
	const chunk = 4096
	switch enc := c.ref.h.Encoding; {
	case enc == encByteStreamSplit:
	case enc == encPlain && r.col.Physical == Boolean:
		c.plainPos += m
	case enc == encPlain && r.col.Physical == ByteArray:
		pos := c.plainPos
		for range m {
			if len(c.values)-pos < 4 {
				return errRunPastEnd
			}
			l := int(binary.LittleEndian.Uint32(c.values[pos:]))
			if l < 0 || l > len(c.values)-pos-4 {
				return errRunPastEnd
			}
			pos += 4 + l
		}
		c.plainPos = pos
	case enc == encPlain:
		c.plainPos += m * r.pw
	case enc == encDeltaLength || enc == encDeltaByteArray:
		for _, l := range r.pageLens[c.lenPos : c.lenPos+m] {
			c.plainPos += int(l)
		}
		c.lenPos += m
	case enc == encDeltaBinaryPacked:
		r.u64 = grow(r.u64, min(m, chunk))
		for done := 0; done < m; done += chunk {
			if err := c.dl.next(r.u64[:min(chunk, m-done)]); err != nil {
				return err
			}
		}
	default: // dictionary indices, RLE booleans
		r.u32 = grow(r.u32, min(m, chunk))
		for done := 0; done < m; done += chunk {
			if err := c.hy.next(r.u32[:min(chunk, m-done)]); err != nil {
				return err
			}
		}
	}
	return nil
}

// put copies src[from:from+l] to dst[at:]. A value of up to 32 bytes moves
// as 32, a copy of constant size, where both have 32 bytes from there: its
// writer puts values end to end in order, so the bytes past its end are
// written over by the values after it. A copy call per value of a few
// bytes costs several times the move.
func put(dst []byte, at int, src []byte, from, l int) {
	if l <= 32 && at+32 <= len(dst) && from+32 <= len(src) {
		copy(dst[at:at+16], src[from:from+16])
		copy(dst[at+16:at+32], src[from+16:from+32])
		return
	}
	copy(dst[at:at+l], src[from:from+l])
}
