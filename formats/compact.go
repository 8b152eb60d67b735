package formats

import (
	"context"
	"encoding/binary"
	"math/bits"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/sluicedata/sluice/internal/unzeroed"
)

// keptRuns returns the runs [start, end) of set bits among the first n of
// keep, ascending, and how many rows they hold. The bits are taken a word
// at a time and each run's ends found by counting trailing zeros, so the
// cost is the words plus the runs: a row in a hundred deleted (an
// equality delete of every hundredth id) leaves a clear bit in most
// words, which a walk bit by bit went through one at a time (3% of such
// a read).
func keptRuns(keep []byte, n int) (runs [][2]int, kept int) {
	start := -1
	for base := 0; base < n; base += 64 {
		var w uint64
		if n-base >= 64 {
			w = binary.LittleEndian.Uint64(keep[base/8:])
		} else {
			for i := range (n - base + 7) / 8 {
				w |= uint64(keep[base/8+i]) << (8 * i)
			}
			w &= 1<<(n-base) - 1 // the bits past n are no rows: clear
		}
		for pos := 0; pos < 64; {
			if start >= 0 {
				z := bits.TrailingZeros64(^w >> pos) // the run's first clear bit
				if pos+z >= 64 {
					break // the run goes on into the next word
				}
				pos += z
				runs, kept = append(runs, [2]int{start, base + pos}), kept+base+pos-start
				start = -1
				continue
			}
			z := bits.TrailingZeros64(w >> pos) // the next run's first bit
			if pos+z >= 64 {
				break
			}
			pos += z
			start = base + pos
		}
	}
	if start >= 0 {
		runs, kept = append(runs, [2]int{start, n}), kept+n-start
	}
	return runs, kept
}

// compact returns the rows of b whose bit in keep is set, in one batch,
// and releases b. Where a row or more of b is deleted (a position or an
// equality delete, a filter), the kept rows are copied run by run: a
// column of fixed-width values or of strings moves each run whole, where
// arrow's filter kernel appends row by row (a tenth of a read of 1%
// deletes went to it). Other types go through the kernel.
func compact(ctx context.Context, b arrow.RecordBatch, keep []byte, mem memory.Allocator) (arrow.RecordBatch, error) {
	defer b.Release()
	n := int(b.NumRows())
	runs, kept := keptRuns(keep, n)
	cols := make([]arrow.Array, b.NumCols())
	defer func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}()
	// Every byte of the copies' buffers is written: they need no zeroing.
	alloc, _ := unzeroed.Of(mem)
	var rest []int // the columns left to arrow's kernel
	for i, col := range b.Columns() {
		if c := compactColumn(col.Data(), runs, kept, alloc); c != nil {
			cols[i] = array.MakeFromData(c)
			c.Release()
			continue
		}
		rest = append(rest, i)
	}
	if len(rest) > 0 {
		// Through FilterRecordBatch, as before this copy: FilterArray
		// (arrow-go 18.8) keeps wrong values of a sliced boolean array.
		fields, in := make([]arrow.Field, len(rest)), make([]arrow.Array, len(rest))
		for k, i := range rest {
			fields[k], in[k] = b.Schema().Field(i), b.Column(i)
		}
		part := array.NewRecordBatch(arrow.NewSchema(fields, nil), in, int64(n))
		defer part.Release()
		buf := memory.NewBufferBytes(keep[:bitutil.BytesForBits(int64(n))])
		data := array.NewData(arrow.FixedWidthTypes.Boolean, n, []*memory.Buffer{nil, buf}, nil, 0, 0)
		mask := array.NewBooleanData(data)
		data.Release()
		defer mask.Release()
		out, err := compute.FilterRecordBatch(compute.WithAllocator(ctx, mem), part, mask, compute.DefaultFilterOptions())
		if err != nil {
			return nil, err
		}
		defer out.Release()
		for k, i := range rest {
			cols[i] = out.Column(k)
			cols[i].Retain()
		}
	}
	return array.NewRecordBatch(b.Schema(), cols, int64(kept)), nil
}

// compactColumn copies the runs of a, or returns nil for a type it does
// not copy itself.
func compactColumn(a arrow.ArrayData, runs [][2]int, kept int, mem memory.Allocator) arrow.ArrayData {
	dt, off := a.DataType(), a.Offset()
	if len(a.Children()) > 0 || dt.ID() == arrow.DICTIONARY || dt.ID() == arrow.EXTENSION {
		return nil
	}
	validity, nulls := compactValidity(a, runs, kept, mem)
	switch dt.ID() {
	case arrow.BOOL:
		vals := newBuffer(mem, int(bitutil.BytesForBits(int64(kept))))
		copyBitRuns(vals.Bytes(), a.Buffers()[1].Bytes(), off, runs)
		return newData(dt, kept, nulls, validity, vals)
	case arrow.STRING, arrow.BINARY:
		return compactVar[int32](dt, a, runs, kept, validity, nulls, mem)
	case arrow.LARGE_STRING, arrow.LARGE_BINARY:
		return compactVar[int64](dt, a, runs, kept, validity, nulls, mem)
	}
	w := byteWidth(dt)
	if w == 0 {
		if validity != nil {
			validity.Release()
		}
		return nil
	}
	vals := newBuffer(mem, kept*w)
	out, src := vals.Bytes(), a.Buffers()[1].Bytes()
	at := 0
	for _, r := range runs {
		at += copy(out[at:], src[(off+r[0])*w:(off+r[1])*w])
	}
	return newData(dt, kept, nulls, validity, vals)
}

// byteWidth is the bytes of one value of a flat fixed-width type, 0 for
// another type.
func byteWidth(dt arrow.DataType) int {
	switch dt.ID() {
	case arrow.INT8, arrow.UINT8, arrow.INT16, arrow.UINT16, arrow.INT32, arrow.UINT32, arrow.INT64, arrow.UINT64,
		arrow.FLOAT16, arrow.FLOAT32, arrow.FLOAT64, arrow.DATE32, arrow.DATE64, arrow.TIME32, arrow.TIME64,
		arrow.TIMESTAMP, arrow.DURATION, arrow.INTERVAL_MONTHS, arrow.INTERVAL_DAY_TIME, arrow.INTERVAL_MONTH_DAY_NANO,
		arrow.DECIMAL32, arrow.DECIMAL64, arrow.DECIMAL128, arrow.DECIMAL256, arrow.FIXED_SIZE_BINARY:
		if fw, ok := dt.(arrow.FixedWidthDataType); ok && fw.BitWidth()%8 == 0 {
			return fw.BitWidth() / 8
		}
	}
	return 0
}

// newData is array data over bufs, which it takes.
func newData(dt arrow.DataType, n, nulls int, bufs ...*memory.Buffer) arrow.ArrayData {
	d := array.NewData(dt, n, bufs, nil, nulls, 0)
	for _, b := range bufs {
		if b != nil {
			b.Release()
		}
	}
	return d
}

func newBuffer(mem memory.Allocator, n int) *memory.Buffer {
	buf := memory.NewResizableBuffer(mem)
	buf.Resize(n)
	return buf
}

// compactValidity copies the validity bits of the runs: nil where a has no
// nulls.
func compactValidity(a arrow.ArrayData, runs [][2]int, kept int, mem memory.Allocator) (*memory.Buffer, int) {
	if a.NullN() == 0 || a.Buffers()[0] == nil {
		return nil, 0
	}
	buf := newBuffer(mem, int(bitutil.BytesForBits(int64(kept))))
	copyBitRuns(buf.Bytes(), a.Buffers()[0].Bytes(), a.Offset(), runs)
	return buf, kept - bitutil.CountSetBits(buf.Bytes(), 0, kept)
}

// copyBitRuns copies the bits of src's runs (shifted by off) into dst, one
// after another from bit 0, and clears the bits after them in dst's last
// byte.
func copyBitRuns(dst, src []byte, off int, runs [][2]int) {
	at := 0
	for _, r := range runs {
		bitutil.CopyBitmap(src, off+r[0], r[1]-r[0], dst, at)
		at += r[1] - r[0]
	}
	if at%8 != 0 {
		dst[at/8] &= byte(1)<<(at%8) - 1
	}
	for i := (at + 7) / 8; i < len(dst); i++ {
		dst[i] = 0
	}
}

// compactVar copies the runs of a string or binary column: each run's
// bytes in one move, its offsets shifted by one difference.
func compactVar[O int32 | int64](dt arrow.DataType, a arrow.ArrayData, runs [][2]int, kept int, validity *memory.Buffer, nulls int, mem memory.Allocator) arrow.ArrayData {
	off := a.Offset()
	offs := arrow.GetData[O](a.Buffers()[1].Bytes())[off : off+a.Len()+1]
	var size O
	for _, r := range runs {
		size += offs[r[1]] - offs[r[0]]
	}
	offBuf := newBuffer(mem, (kept+1)*int(unsafe.Sizeof(O(0))))
	out := arrow.GetData[O](offBuf.Bytes())
	valBuf := newBuffer(mem, int(size))
	var src []byte
	if len(a.Buffers()) > 2 && a.Buffers()[2] != nil {
		src = a.Buffers()[2].Bytes()
	}
	vals := valBuf.Bytes()
	at, pos := 0, O(0)
	for _, r := range runs {
		shift := pos - offs[r[0]]
		for i := r[0]; i < r[1]; i++ {
			out[at] = offs[i] + shift
			at++
		}
		next := offs[r[1]] + shift
		copy(vals[pos:next], src[offs[r[0]]:offs[r[1]]])
		pos = next
	}
	out[at] = pos
	return newData(dt, kept, nulls, validity, offBuf, valBuf)
}

// and clears the bits of keep for the rows a filter's answer k does not
// keep: false or null.
func and(keep []byte, k *array.Boolean) {
	vals := k.Data().Buffers()[1].Bytes()
	var valid []byte
	if k.NullN() > 0 {
		valid = k.Data().Buffers()[0].Bytes()
	}
	off, n := k.Data().Offset(), k.Len()
	if off == 0 {
		full := n / 8
		for i := range full {
			m := vals[i]
			if valid != nil {
				m &= valid[i]
			}
			keep[i] &= m
		}
		if n%8 != 0 {
			m := vals[full] | ^(byte(1)<<(n%8) - 1)
			if valid != nil {
				m &= valid[full] | ^(byte(1)<<(n%8) - 1)
			}
			keep[full] &= m
		}
		return
	}
	for r := range n {
		if !bitutil.BitIsSet(vals, off+r) || (valid != nil && !bitutil.BitIsSet(valid, off+r)) {
			bitutil.ClearBit(keep, r)
		}
	}
}

// allKept is a bitmap of n set bits.
func allKept(n int) []byte {
	keep := make([]byte, bitutil.BytesForBits(int64(n)))
	for i := range keep {
		keep[i] = 0xff
	}
	return keep
}
