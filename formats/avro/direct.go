package avro

import (
	"encoding/binary"
	"errors"
	"math"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/sluicedata/sluice/internal/unzeroed"
)

// direct collects a top-level column of longs, doubles or strings (or a
// union of null and one of them) straight into the buffers of its batch's
// array, where a builder's Append checks its room and grows at each value
// (a third of a read of the bench's rows went to the builders). Only for
// an allocator whose memory is the Go runtime's (unzeroed.RuntimeMemory):
// the batch is made of memory the allocator never handed out.
type direct struct {
	typ arrow.DataType
	// null and value are a nullable column's union branches; null is -1
	// where the column is not a union.
	null, value int
	// i64 or f64 holds a long's or a double's values; offs and data a
	// string's.
	i64  []int64
	f64  []float64
	offs []int32
	data []byte
	// valid has a bit a row of a nullable column, set where the value is
	// not null; nulls counts the nulls.
	valid []byte
	nulls int
	rows  int
}

// directOf returns the direct column of n, or nil where n is not one.
func directOf(n *node) *direct {
	d := &direct{null: -1, value: -1}
	v := n
	if n.kind == kUnion {
		if len(n.branches) != 2 || n.value < 0 || n.null < 0 {
			return nil
		}
		d.null, d.value, v = n.null, n.value, n.branches[n.value]
	}
	switch {
	case v.kind == kLong && v.arrow.ID() == arrow.INT64,
		v.kind == kDouble && v.arrow.ID() == arrow.FLOAT64,
		v.kind == kString && v.arrow.ID() == arrow.STRING:
	default:
		return nil
	}
	if !arrow.TypeEqual(v.arrow, n.arrow) {
		return nil
	}
	d.typ = n.arrow
	return d
}

// start makes room for a batch of n rows, and dataBytes of strings.
func (d *direct) start(n, dataBytes int) {
	d.rows, d.nulls = 0, 0
	switch d.typ.ID() {
	case arrow.INT64:
		d.i64 = unsafe.Slice((*int64)(unsafe.Pointer(unsafe.SliceData(aligned8(n*8)))), n)[:0]
	case arrow.FLOAT64:
		d.f64 = unsafe.Slice((*float64)(unsafe.Pointer(unsafe.SliceData(aligned8(n*8)))), n)[:0]
	case arrow.STRING:
		d.offs = unsafe.Slice((*int32)(unsafe.Pointer(unsafe.SliceData(aligned8(n*4+4)))), n+1)[:1]
		d.offs[0] = 0
		d.data = unzeroed.Bytes(max(dataBytes, 64))[:0]
	}
	if d.null >= 0 {
		d.valid = make([]byte, bitutil.BytesForBits(int64(n)))
	}
}

// aligned8 is n unzeroed bytes (at least 8) at an address a multiple of 8,
// as the Go runtime places any allocation of 8 bytes or more.
func aligned8(n int) []byte { return unzeroed.Bytes(max(n, 8)) }

var errBig = errors.New("a batch of strings of more than 2 GiB")

// decode decodes one value, or fails c. Rows past the room start made are
// refused by the slices' append growing them: room is a matter of speed,
// never of values.
func (d *direct) decode(c *cursor) {
	if d.null >= 0 {
		switch c.branch(2) {
		case d.null:
			d.nulls++
			d.rows++
			d.appendZero()
			return
		case d.value:
			if len(d.valid) <= d.rows/8 {
				d.valid = append(d.valid, make([]byte, d.rows/8+1-len(d.valid))...)
			}
			d.valid[d.rows/8] |= 1 << (d.rows % 8)
		default:
			return // c failed
		}
	}
	switch d.typ.ID() {
	case arrow.INT64:
		d.i64 = append(d.i64, c.long())
	case arrow.FLOAT64:
		if v := c.take(8); v != nil {
			d.f64 = append(d.f64, math.Float64frombits(binary.LittleEndian.Uint64(v)))
		}
	case arrow.STRING:
		if v := c.str(); c.err == nil {
			if len(d.data)+len(v) > math.MaxInt32 {
				c.fail(errBig)
				return
			}
			d.data = append(d.data, v...)
			d.offs = append(d.offs, int32(len(d.data)))
		}
	}
	d.rows++
}

// appendZero gives a null row its slot.
func (d *direct) appendZero() {
	switch d.typ.ID() {
	case arrow.INT64:
		d.i64 = append(d.i64, 0)
	case arrow.FLOAT64:
		d.f64 = append(d.f64, 0)
	case arrow.STRING:
		d.offs = append(d.offs, int32(len(d.data)))
	}
	if len(d.valid) <= d.rows/8 {
		d.valid = append(d.valid, make([]byte, d.rows/8+1-len(d.valid))...)
	}
}

// array hands the batch's values over as an array, which then owns them.
func (d *direct) array() arrow.ArrayData {
	var validity *memory.Buffer
	if d.nulls > 0 {
		validity = memory.NewBufferBytes(d.valid[:bitutil.BytesForBits(int64(d.rows))])
	}
	var bufs []*memory.Buffer
	switch d.typ.ID() {
	case arrow.INT64:
		bufs = []*memory.Buffer{validity, memory.NewBufferBytes(arrow.Int64Traits.CastToBytes(d.i64))}
	case arrow.FLOAT64:
		bufs = []*memory.Buffer{validity, memory.NewBufferBytes(arrow.Float64Traits.CastToBytes(d.f64))}
	case arrow.STRING:
		bufs = []*memory.Buffer{validity, memory.NewBufferBytes(arrow.Int32Traits.CastToBytes(d.offs)), memory.NewBufferBytes(d.data)}
	}
	out := array.NewData(d.typ, d.rows, bufs, nil, d.nulls, 0)
	d.i64, d.f64, d.offs, d.data, d.valid = nil, nil, nil, nil, nil
	return out
}
