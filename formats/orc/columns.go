package orc

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/big"
	"math/bits"
	"strconv"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// schema is a file's type tree, checked: every subtype names a later type,
// each type is reached once, and the kinds are known.
type schema struct {
	types []orcType
	// parent[id] is the type that holds id (-1 for the root).
	parent []int
	// last[id] is the largest type id in id's subtree: a column's streams
	// are those of ids [id, last[id]].
	last []int
	// decimal64 is set for files whose small decimals are stored as plain
	// integers (ORC's unstable 2.0 preview, "decimal64_v2").
	decimal64 bool
}

func newSchema(types []orcType) (*schema, error) {
	if len(types) == 0 {
		return nil, errors.New("the footer has no types")
	}
	s := &schema{types: types, parent: make([]int, len(types)), last: make([]int, len(types))}
	for i := range s.parent {
		s.parent[i] = -2
	}
	s.parent[0] = -1
	for id, t := range types {
		if s.parent[id] == -2 {
			return nil, fmt.Errorf("type %d is not reached from the root", id)
		}
		if t.kind > kTimestampInstant {
			return nil, fmt.Errorf("type %d has unknown kind %d", id, t.kind)
		}
		want := -1
		switch t.kind {
		case kList:
			want = 1
		case kMap:
			want = 2
		case kStruct:
			if len(t.fieldNames) != len(t.subtypes) {
				return nil, fmt.Errorf("struct type %d has %d field names for %d fields", id, len(t.fieldNames), len(t.subtypes))
			}
		case kUnion:
			if len(t.subtypes) == 0 || len(t.subtypes) > 127 {
				return nil, fmt.Errorf("union type %d has %d variants", id, len(t.subtypes))
			}
		default:
			want = 0
		}
		if want >= 0 && len(t.subtypes) != want {
			return nil, fmt.Errorf("%s type %d has %d subtypes", kindName(t.kind), id, len(t.subtypes))
		}
		for _, c := range t.subtypes {
			if int(c) <= id || int(c) >= len(types) || s.parent[c] != -2 {
				return nil, fmt.Errorf("type %d names subtype %d out of order", id, c)
			}
			s.parent[c] = id
		}
	}
	for id := len(types) - 1; id >= 0; id-- {
		s.last[id] = id
		for _, c := range types[id].subtypes {
			s.last[id] = max(s.last[id], s.last[c])
		}
	}
	// Type ids are preorder: a subtree's ids are contiguous.
	for id, t := range types {
		next := id + 1
		for _, c := range t.subtypes {
			if int(c) != next {
				return nil, fmt.Errorf("type %d: subtype %d is not in preorder", id, c)
			}
			next = s.last[c] + 1
		}
	}
	return s, nil
}

// arrowType is the Arrow type of type id.
func (s *schema) arrowType(id int) (arrow.DataType, error) {
	t := s.types[id]
	switch t.kind {
	case kBoolean:
		return arrow.FixedWidthTypes.Boolean, nil
	case kByte:
		return arrow.PrimitiveTypes.Int8, nil
	case kShort:
		return arrow.PrimitiveTypes.Int16, nil
	case kInt:
		return arrow.PrimitiveTypes.Int32, nil
	case kLong:
		return arrow.PrimitiveTypes.Int64, nil
	case kFloat:
		return arrow.PrimitiveTypes.Float32, nil
	case kDouble:
		return arrow.PrimitiveTypes.Float64, nil
	case kString, kVarchar, kChar:
		return arrow.BinaryTypes.String, nil
	case kBinary:
		return arrow.BinaryTypes.Binary, nil
	case kTimestamp:
		return &arrow.TimestampType{Unit: arrow.Nanosecond}, nil
	case kTimestampInstant:
		return &arrow.TimestampType{Unit: arrow.Nanosecond, TimeZone: "UTC"}, nil
	case kDate:
		return arrow.FixedWidthTypes.Date32, nil
	case kDecimal:
		p, sc := decimalShape(t)
		return &arrow.Decimal128Type{Precision: p, Scale: sc}, nil
	case kList:
		et, err := s.arrowType(int(t.subtypes[0]))
		if err != nil {
			return nil, err
		}
		return arrow.ListOfField(arrow.Field{Name: "element", Type: et, Nullable: true, Metadata: s.idMetadata(int(t.subtypes[0]))}), nil
	case kMap:
		kt, err := s.arrowType(int(t.subtypes[0]))
		if err != nil {
			return nil, err
		}
		vt, err := s.arrowType(int(t.subtypes[1]))
		if err != nil {
			return nil, err
		}
		if s.types[t.subtypes[0]].icebergID >= 0 || s.types[t.subtypes[1]].icebergID >= 0 {
			return arrow.MapOfWithMetadata(kt, s.idMetadata(int(t.subtypes[0])), vt, s.idMetadata(int(t.subtypes[1]))), nil
		}
		return arrow.MapOf(kt, vt), nil
	case kStruct:
		fs := make([]arrow.Field, len(t.subtypes))
		for i, c := range t.subtypes {
			ft, err := s.arrowType(int(c))
			if err != nil {
				return nil, err
			}
			fs[i] = arrow.Field{Name: t.fieldNames[i], Type: ft, Nullable: true, Metadata: s.idMetadata(int(c))}
		}
		return arrow.StructOf(fs...), nil
	case kUnion:
		fs := make([]arrow.Field, len(t.subtypes))
		codes := make([]arrow.UnionTypeCode, len(t.subtypes))
		for i, c := range t.subtypes {
			ft, err := s.arrowType(int(c))
			if err != nil {
				return nil, err
			}
			fs[i] = arrow.Field{Name: fmt.Sprintf("_%d", i), Type: ft, Nullable: true}
			codes[i] = arrow.UnionTypeCode(i)
		}
		return arrow.DenseUnionOf(fs, codes), nil
	}
	return nil, fmt.Errorf("type %d: unknown kind %d", id, t.kind)
}

// fieldIDKey is the Arrow field metadata key Iceberg's column mapping
// reads field ids from (the one Parquet files carry them under).
const fieldIDKey = "PARQUET:field_id"

// idMetadata is the Arrow field metadata of type id: its Iceberg field id
// (the "iceberg.id" attribute), if it has one.
func (s *schema) idMetadata(id int) arrow.Metadata {
	if fid := s.types[id].icebergID; fid >= 0 {
		return arrow.NewMetadata([]string{fieldIDKey}, []string{strconv.Itoa(fid)})
	}
	return arrow.Metadata{}
}

// decimalShape is the Arrow precision and scale of a decimal type. Hive
// 0.11 wrote decimals without either (each value has its own scale): they
// are read as ORC's readers do, as decimal(38, 10).
func decimalShape(t orcType) (int32, int32) {
	if t.precision == 0 {
		return 38, 10
	}
	return int32(min(t.precision, 38)), int32(min(t.scale, t.precision, 38))
}

// stripeStreams are the decoded streams of one stripe's selected columns.
type stripeStreams struct {
	data map[streamKey][]byte
	// seek holds, for reads that start at a row group, the values of each
	// stream that come before the group in its first run (its data starts
	// at the run): one count, or for booleans the bytes and the bits.
	seek map[streamKey][]uint64
	enc  []encoding
	// tz is the writer's time zone, for timestamps.
	tz *time.Location
}

type streamKey struct {
	column uint32
	kind   uint64
}

func (st *stripeStreams) stream(col int, kind uint64) ([]byte, bool) {
	b, ok := st.data[streamKey{uint32(col), kind}]
	return b, ok
}

// skipOf is how many values a decoder of the stream skips after its start,
// where a read starts at a row group (see stripeStreams.seek).
func (st *stripeStreams) skipOf(col int, kind uint64) []uint64 {
	return st.seek[streamKey{uint32(col), kind}]
}

// need returns a stream a column reads. Writers leave out empty streams
// (a column all of whose values are null has no DATA): a missing stream is
// empty, and a decoder asked for values from it reports that it ended.
func (st *stripeStreams) need(col int, kind uint64, what string) ([]byte, error) {
	b, _ := st.stream(col, kind)
	return b, nil
}

// column decodes one column of a stripe into Arrow arrays.
type column interface {
	// next decodes n rows. parentNull, if set, marks the rows whose parent
	// is null: they have no entry in this column's streams and are null.
	next(n int, parentNull []bool) (arrow.Array, error)
}

// base holds what every column has: its PRESENT stream.
type base struct {
	id      int
	name    string
	mem     memory.Allocator
	dt      arrow.DataType
	present *boolRLE
	bits    []bool
}

// presence returns which of n rows have a value (nil: all of them), and
// how many do.
func (b *base) presence(n int, parentNull []bool) ([]bool, int, error) {
	if b.present == nil && parentNull == nil {
		return nil, n, nil
	}
	if cap(b.bits) < n {
		b.bits = make([]bool, n)
	}
	valid := b.bits[:n]
	count := 0
	if parentNull == nil {
		if err := b.present.next(valid); err != nil {
			return nil, 0, fmt.Errorf("PRESENT: %w", err)
		}
	} else {
		for i := range valid {
			switch {
			case parentNull[i]:
				valid[i] = false
			case b.present == nil:
				valid[i] = true
			default:
				var one [1]bool
				if err := b.present.next(one[:]); err != nil {
					return nil, 0, fmt.Errorf("PRESENT: %w", err)
				}
				valid[i] = one[0]
			}
		}
	}
	for _, v := range valid {
		if v {
			count++
		}
	}
	if count == n {
		return nil, n, nil
	}
	return valid, count, nil
}

// nullsOf is the inverse of valid, for children (nil for none).
func nullsOf(valid []bool) []bool {
	if valid == nil {
		return nil
	}
	out := make([]bool, len(valid))
	for i, v := range valid {
		out[i] = !v
	}
	return out
}

// validityBuffer packs valid into an Arrow validity bitmap.
func validityBuffer(mem memory.Allocator, valid []bool) (*memory.Buffer, int) {
	if valid == nil {
		return nil, 0
	}
	buf := memory.NewResizableBuffer(mem)
	buf.Resize(int(bitutil.BytesForBits(int64(len(valid)))))
	bs := buf.Bytes()
	clear(bs)
	nulls := 0
	for i, v := range valid {
		if v {
			bitutil.SetBit(bs, i)
		} else {
			nulls++
		}
	}
	return buf, nulls
}

func newBuffer(mem memory.Allocator, n int) *memory.Buffer {
	buf := memory.NewResizableBuffer(mem)
	buf.Resize(n)
	return buf
}

// fixedArray builds an array of a fixed-width type from its value buffer.
func fixedArray(mem memory.Allocator, dt arrow.DataType, n int, valid []bool, values *memory.Buffer) arrow.Array {
	vb, nulls := validityBuffer(mem, valid)
	data := array.NewData(dt, n, []*memory.Buffer{vb, values}, nil, nulls, 0)
	if vb != nil {
		vb.Release()
	}
	values.Release()
	defer data.Release()
	return array.MakeFromData(data)
}

// scatter spreads count dense values over the valid rows of out, from the
// end, so that dense values and out may share storage.
func scatter[T any](out []T, valid []bool, count int) {
	if valid == nil {
		return
	}
	j := count - 1
	for i := len(out) - 1; i >= 0; i-- {
		if valid[i] {
			out[i] = out[j]
			j--
		} else {
			var zero T
			out[i] = zero
		}
	}
}

// newColumn builds the reader of type id over a stripe's streams.
func (s *schema) newColumn(id int, name string, st *stripeStreams, mem memory.Allocator) (column, error) {
	b, enc, err := s.columnBase(id, name, st, mem)
	if err != nil {
		return nil, err
	}
	cs := columnStreams{stripeStreams: st, id: id, name: name, v2: enc.kind == eDirectV2 || enc.kind == eDictionaryV2}
	t := s.types[id]
	switch t.kind {
	case kList, kMap, kStruct, kUnion:
		return s.nestedColumn(b, cs, mem)
	case kString, kVarchar, kChar, kBinary:
		if enc.kind == eDictionary || enc.kind == eDictionaryV2 {
			return s.dictColumn(b, cs, enc)
		}
	}
	return s.leafColumn(b, cs)
}

// columnBase is what every reader of type id has (its Arrow type and
// PRESENT stream), and the column's encoding in the stripe, checked.
func (s *schema) columnBase(id int, name string, st *stripeStreams, mem memory.Allocator) (base, encoding, error) {
	t := s.types[id]
	dt, err := s.arrowType(id)
	if err != nil {
		return base{}, encoding{}, err
	}
	b := base{id: id, name: name, mem: mem, dt: dt}
	if p, ok := st.stream(id, sPresent); ok {
		b.present = &boolRLE{}
		b.present.reset(p)
		if err := skipBools(b.present, st.skipOf(id, sPresent)); err != nil {
			return base{}, encoding{}, fmt.Errorf("column %d (%s): PRESENT: seek: %w", id, name, err)
		}
	}
	if id >= len(st.enc) {
		return base{}, encoding{}, fmt.Errorf("column %d (%s) has no encoding in the stripe footer", id, name)
	}
	enc := st.enc[id]
	dict := enc.kind == eDictionary || enc.kind == eDictionaryV2
	if enc.kind > eDictionaryV2 {
		return base{}, encoding{}, fmt.Errorf("column %d (%s) has unknown encoding %d", id, name, enc.kind)
	}
	if dict && t.kind != kString && t.kind != kVarchar && t.kind != kChar {
		return base{}, encoding{}, fmt.Errorf("column %d (%s): %s does not take a dictionary encoding", id, name, kindName(t.kind))
	}
	return b, enc, nil
}

// columnStreams are one column's streams of a stripe, and whether its
// integers are run-length encoded in version 2.
type columnStreams struct {
	*stripeStreams
	id   int
	name string
	v2   bool
}

// ints reads the column's stream of kind as integers, from where the read
// starts.
func (cs columnStreams) ints(kind uint64, signed bool, what string) (intReader, error) {
	data, err := cs.need(cs.id, kind, what)
	if err != nil {
		return nil, err
	}
	return cs.intsOf(data, kind, signed, what)
}

// intsOf reads data, the column's stream of kind, as integers, from where
// the read starts.
func (cs columnStreams) intsOf(data []byte, kind uint64, signed bool, what string) (intReader, error) {
	r := newIntReader(cs.v2, signed)
	r.reset(data)
	if sk := cs.skipOf(cs.id, kind); len(sk) > 0 {
		if err := r.skip(int(min(sk[0], 1<<20))); err != nil {
			return nil, fmt.Errorf("column %d (%s): %s: seek: %w", cs.id, cs.name, what, err)
		}
	}
	return r, nil
}

// leafColumn builds the reader of a column of values: booleans, numbers,
// strings and binaries (DIRECT), timestamps and decimals.
func (s *schema) leafColumn(b base, cs columnStreams) (column, error) {
	id, name := cs.id, cs.name
	t := s.types[id]
	switch t.kind {
	case kBoolean:
		data, err := cs.need(id, sData, "DATA")
		if err != nil {
			return nil, err
		}
		c := &boolColumn{base: b}
		c.data.reset(data)
		if err := skipBools(&c.data, cs.skipOf(id, sData)); err != nil {
			return nil, fmt.Errorf("column %d (%s): DATA: seek: %w", id, name, err)
		}
		return c, nil
	case kByte:
		data, err := cs.need(id, sData, "DATA")
		if err != nil {
			return nil, err
		}
		c := &byteColumn{base: b}
		c.data.reset(data)
		if err := skipBytes(&c.data, cs.skipOf(id, sData)); err != nil {
			return nil, fmt.Errorf("column %d (%s): DATA: seek: %w", id, name, err)
		}
		return c, nil
	case kShort, kInt, kLong, kDate:
		r, err := cs.ints(sData, true, "DATA")
		if err != nil {
			return nil, err
		}
		return &intColumn{base: b, data: r, kind: t.kind}, nil
	case kFloat, kDouble:
		data, err := cs.need(id, sData, "DATA")
		if err != nil {
			return nil, err
		}
		return &floatColumn{base: b, data: data, double: t.kind == kDouble}, nil
	case kString, kVarchar, kChar, kBinary:
		data, err := cs.need(id, sData, "DATA")
		if err != nil {
			return nil, err
		}
		lengths, err := cs.ints(sLength, false, "LENGTH")
		if err != nil {
			return nil, err
		}
		return &bytesColumn{base: b, data: data, lengths: lengths}, nil
	case kTimestamp, kTimestampInstant:
		secs, err := cs.ints(sData, true, "DATA")
		if err != nil {
			return nil, err
		}
		nanos, err := cs.ints(sSecondary, false, "SECONDARY")
		if err != nil {
			return nil, err
		}
		c := &timestampColumn{base: b, secs: secs, nanos: nanos, loc: time.UTC}
		if t.kind == kTimestamp && cs.tz != nil {
			c.loc = cs.tz
		}
		return c, nil
	case kDecimal:
		p, sc := decimalShape(t)
		c := &decimalColumn{base: b, scale: sc, precision: p}
		if s.decimal64 && t.precision <= 18 && t.precision > 0 {
			// Stored as integers already at the type's scale.
			r, err := cs.ints(sData, true, "DATA")
			if err != nil {
				return nil, err
			}
			c.small = r
			return c, nil
		}
		data, err := cs.need(id, sData, "DATA")
		if err != nil {
			return nil, err
		}
		c.data = data
		if c.scales, err = cs.ints(sSecondary, true, "SECONDARY"); err != nil {
			return nil, err
		}
		return c, nil
	}
	return nil, fmt.Errorf("column %d (%s): %s is not supported", id, name, kindName(t.kind))
}

// nestedColumn builds the reader of a list, map, struct or union column
// and its children's.
func (s *schema) nestedColumn(b base, cs columnStreams, mem memory.Allocator) (column, error) {
	id, name := cs.id, cs.name
	t := s.types[id]
	switch t.kind {
	case kList, kMap:
		lengths, err := cs.ints(sLength, false, "LENGTH")
		if err != nil {
			return nil, err
		}
		c := &listColumn{base: b, lengths: lengths}
		for i, sub := range t.subtypes {
			child, err := s.newColumn(int(sub), fmt.Sprintf("%s.%s", name, []string{"element", "key", "value"}[i+int(t.kind-kList)]), cs.stripeStreams, mem)
			if err != nil {
				return nil, err
			}
			c.children = append(c.children, child)
		}
		return c, nil
	case kStruct:
		c := &structColumn{base: b}
		for i, sub := range t.subtypes {
			child, err := s.newColumn(int(sub), name+"."+t.fieldNames[i], cs.stripeStreams, mem)
			if err != nil {
				return nil, err
			}
			c.children = append(c.children, child)
		}
		return c, nil
	case kUnion:
		tags, err := cs.need(id, sData, "DATA")
		if err != nil {
			return nil, err
		}
		c := &unionColumn{base: b}
		c.tags.reset(tags)
		if err := skipBytes(&c.tags, cs.skipOf(id, sData)); err != nil {
			return nil, fmt.Errorf("column %d (%s): DATA: seek: %w", id, name, err)
		}
		for i, sub := range t.subtypes {
			child, err := s.newColumn(int(sub), fmt.Sprintf("%s._%d", name, i), cs.stripeStreams, mem)
			if err != nil {
				return nil, err
			}
			c.children = append(c.children, child)
		}
		return c, nil
	}
	return nil, fmt.Errorf("column %d (%s): %s is not supported", id, name, kindName(t.kind))
}

type boolColumn struct {
	base
	data boolRLE
	vals []bool
}

func (c *boolColumn) next(n int, parentNull []bool) (arrow.Array, error) {
	valid, count, err := c.presence(n, parentNull)
	if err != nil {
		return nil, err
	}
	if cap(c.vals) < n {
		c.vals = make([]bool, n)
	}
	vals := c.vals[:n]
	if err := c.data.next(vals[:count]); err != nil {
		return nil, fmt.Errorf("DATA: %w", err)
	}
	scatter(vals, valid, count)
	buf := newBuffer(c.mem, int(bitutil.BytesForBits(int64(n))))
	bs := buf.Bytes()
	clear(bs)
	for i, v := range vals {
		if v {
			bitutil.SetBit(bs, i)
		}
	}
	return fixedArray(c.mem, c.dt, n, valid, buf), nil
}

type byteColumn struct {
	base
	data byteRLE
}

func (c *byteColumn) next(n int, parentNull []bool) (arrow.Array, error) {
	valid, count, err := c.presence(n, parentNull)
	if err != nil {
		return nil, err
	}
	buf := newBuffer(c.mem, n)
	out := buf.Bytes()
	if err := c.data.next(out[:count]); err != nil {
		buf.Release()
		return nil, fmt.Errorf("DATA: %w", err)
	}
	scatter(out, valid, count)
	return fixedArray(c.mem, c.dt, n, valid, buf), nil
}

type intColumn struct {
	base
	data intReader
	kind uint64
}

func (c *intColumn) next(n int, parentNull []bool) (arrow.Array, error) {
	valid, count, err := c.presence(n, parentNull)
	if err != nil {
		return nil, err
	}
	var buf *memory.Buffer
	switch c.kind {
	case kLong:
		buf = newBuffer(c.mem, 8*n)
		out := arrow.GetData[int64](buf.Bytes())
		if err := c.data.next(out[:count]); err != nil {
			buf.Release()
			return nil, fmt.Errorf("DATA: %w", err)
		}
		scatter(out, valid, count)
		return fixedArray(c.mem, c.dt, n, valid, buf), nil
	case kShort:
		buf = newBuffer(c.mem, 2*n)
	default:
		buf = newBuffer(c.mem, 4*n)
	}
	scratch, vals, err := nextInts(c.data, count, "DATA")
	if err != nil {
		buf.Release()
		return nil, err
	}
	defer intScratch.Put(scratch)
	if c.kind == kShort {
		out := arrow.GetData[int16](buf.Bytes())
		for i, v := range vals {
			if v != int64(int16(v)) {
				buf.Release()
				return nil, fmt.Errorf("DATA: value %d does not fit a smallint", v)
			}
			out[i] = int16(v)
		}
		scatter(out, valid, count)
	} else {
		out := arrow.GetData[int32](buf.Bytes())
		for i, v := range vals {
			if v != int64(int32(v)) {
				buf.Release()
				return nil, fmt.Errorf("DATA: value %d does not fit a 32-bit %s", v, kindName(c.kind))
			}
			out[i] = int32(v)
		}
		scatter(out, valid, count)
	}
	return fixedArray(c.mem, c.dt, n, valid, buf), nil
}

type floatColumn struct {
	base
	data   []byte
	pos    int
	double bool
}

func (c *floatColumn) next(n int, parentNull []bool) (arrow.Array, error) {
	valid, count, err := c.presence(n, parentNull)
	if err != nil {
		return nil, err
	}
	size := 4
	if c.double {
		size = 8
	}
	if count*size > len(c.data)-c.pos {
		return nil, fmt.Errorf("DATA: %w", errShort)
	}
	buf := newBuffer(c.mem, size*n)
	copy(buf.Bytes(), c.data[c.pos:c.pos+count*size])
	c.pos += count * size
	if c.double {
		scatter(arrow.GetData[float64](buf.Bytes()), valid, count)
	} else {
		scatter(arrow.GetData[float32](buf.Bytes()), valid, count)
	}
	return fixedArray(c.mem, c.dt, n, valid, buf), nil
}

// intScratch holds the integers a batch decodes before they become its
// values: a stripe's readers are made for each part of a fetch the stream
// decodes, and a buffer of their own would be made again for each.
var intScratch = sync.Pool{New: func() any { return new([]int64) }}

// nextInts decodes count integers of r into a scratch buffer, which the
// caller gives back with putInts; an error names the stream, what.
func nextInts(r intReader, count int, what string) (*[]int64, []int64, error) {
	buf := intScratch.Get().(*[]int64)
	if cap(*buf) < count {
		*buf = make([]int64, count)
	}
	vals := (*buf)[:count]
	if err := r.next(vals); err != nil {
		intScratch.Put(buf)
		return nil, nil, fmt.Errorf("%s: %w", what, err)
	}
	return buf, vals, nil
}

// maxBatchBytes bounds the string bytes of one batch: Arrow's offsets are
// 32-bit.
const maxBatchBytes = math.MaxInt32

type bytesColumn struct {
	base
	data    []byte
	pos     int
	lengths intReader
}

func (c *bytesColumn) next(n int, parentNull []bool) (arrow.Array, error) {
	valid, count, err := c.presence(n, parentNull)
	if err != nil {
		return nil, err
	}
	scratch, lens, err := nextInts(c.lengths, count, "LENGTH")
	if err != nil {
		return nil, err
	}
	defer intScratch.Put(scratch)
	var total int64
	for _, l := range lens {
		if l < 0 || l > int64(len(c.data)) {
			return nil, fmt.Errorf("LENGTH: value length %d", l)
		}
		total += l
	}
	if total > int64(len(c.data)-c.pos) {
		return nil, fmt.Errorf("DATA: %d bytes asked of %d left: %w", total, len(c.data)-c.pos, errShort)
	}
	if total > maxBatchBytes {
		return nil, fmt.Errorf("DATA: %d bytes in one batch is more than Arrow's offsets hold; use smaller batches", total)
	}
	offs := newBuffer(c.mem, 4*(n+1))
	o := arrow.GetData[int32](offs.Bytes())
	vals := newBuffer(c.mem, int(total))
	copy(vals.Bytes(), c.data[c.pos:c.pos+int(total)])
	c.pos += int(total)
	at, j := int32(0), 0
	for i := range n {
		o[i] = at
		if valid == nil || valid[i] {
			at += int32(lens[j])
			j++
		}
	}
	o[n] = at
	return varArray(c.mem, c.dt, n, valid, offs, vals), nil
}

func varArray(mem memory.Allocator, dt arrow.DataType, n int, valid []bool, offs, vals *memory.Buffer) arrow.Array {
	vb, nulls := validityBuffer(mem, valid)
	data := array.NewData(dt, n, []*memory.Buffer{vb, offs, vals}, nil, nulls, 0)
	for _, b := range []*memory.Buffer{vb, offs, vals} {
		if b != nil {
			b.Release()
		}
	}
	defer data.Release()
	return array.MakeFromData(data)
}

// dictColumn reads a string column's dictionary, which the stripe holds
// whole, and returns the reader of its indices.
func (s *schema) dictColumn(b base, st columnStreams, enc encoding) (column, error) {
	id := b.id
	dictData, ok := st.stream(id, sDictionaryData)
	if !ok && enc.dictSize > 0 {
		return nil, fmt.Errorf("column %d (%s) has no DICTIONARY_DATA stream", id, b.name)
	}
	data, err := st.need(id, sData, "DATA")
	if err != nil {
		return nil, err
	}
	lenData, ok := st.stream(id, sLength)
	if !ok && enc.dictSize > 0 {
		return nil, fmt.Errorf("column %d (%s) has no LENGTH stream", id, b.name)
	}
	// A run-length byte holds at most 128 lengths (a delta run of 512 in
	// 4 bytes): a larger claim is refused before it sizes anything.
	if enc.dictSize > uint64(len(lenData))*128+512 {
		return nil, fmt.Errorf("column %d (%s): dictionary of %d entries in a LENGTH stream of %d bytes", id, b.name, enc.dictSize, len(lenData))
	}
	lengths := newIntReader(st.v2, false)
	lengths.reset(lenData)
	lens := make([]int64, enc.dictSize)
	if err := lengths.next(lens); err != nil {
		return nil, fmt.Errorf("column %d (%s): dictionary LENGTH: %w", id, b.name, err)
	}
	offs := make([]int64, len(lens)+1)
	for i, l := range lens {
		if l < 0 || l > int64(len(dictData))-offs[i] {
			return nil, fmt.Errorf("column %d (%s): dictionary entry %d of length %d overruns the %d dictionary bytes", id, b.name, i, l, len(dictData))
		}
		offs[i+1] = offs[i] + l
	}
	idx, err := st.intsOf(data, sData, false, "DATA")
	if err != nil {
		return nil, err
	}
	c := &dictColumn{base: b, dict: dictData, offs: offs, idx: idx}
	if len(lens) <= maxWordEntries {
		c.words = make([][2]uint64, len(lens))
		for i, l := range lens {
			if l > 16 {
				c.words = nil
				break
			}
			var w [16]byte
			copy(w[:], dictData[offs[i]:offs[i+1]])
			c.words[i] = [2]uint64{binary.LittleEndian.Uint64(w[:8]), binary.LittleEndian.Uint64(w[8:])}
		}
	}
	return c, nil
}

// maxWordEntries bounds the dictionaries kept as words (see dictColumn).
const maxWordEntries = 1 << 16

type dictColumn struct {
	base
	dict []byte
	offs []int64
	idx  intReader
	// words holds each entry, where all are of 16 bytes or less, padded
	// with zeros to two words: a value is then two stores rather than a
	// copy of a few bytes each (Hive's dictionaries of short codes).
	words [][2]uint64
}

func (c *dictColumn) next(n int, parentNull []bool) (arrow.Array, error) {
	valid, count, err := c.presence(n, parentNull)
	if err != nil {
		return nil, err
	}
	scratch, ids, err := nextInts(c.idx, count, "DATA")
	if err != nil {
		return nil, err
	}
	defer intScratch.Put(scratch)
	var total int64
	entries := int64(len(c.offs) - 1)
	for _, x := range ids {
		if x < 0 || x >= entries {
			return nil, fmt.Errorf("DATA: dictionary index %d of %d entries", x, entries)
		}
		total += c.offs[x+1] - c.offs[x]
	}
	if total > maxBatchBytes {
		return nil, fmt.Errorf("DATA: %d bytes in one batch is more than Arrow's offsets hold; use smaller batches", total)
	}
	offs := newBuffer(c.mem, 4*(n+1))
	o := arrow.GetData[int32](offs.Bytes())
	if c.words != nil && valid == nil {
		// Each value is stored as its two padded words; the next value
		// overwrites the padding, and the buffer has 16 bytes to spare.
		vals := newBuffer(c.mem, int(total)+16)
		vb := vals.Bytes()
		at := 0
		for i, x := range ids {
			o[i] = int32(at)
			w := &c.words[x]
			binary.LittleEndian.PutUint64(vb[at:], w[0])
			binary.LittleEndian.PutUint64(vb[at+8:], w[1])
			at += int(c.offs[x+1] - c.offs[x])
		}
		o[n] = int32(at)
		vals.ResizeNoShrink(int(total))
		return varArray(c.mem, c.dt, n, valid, offs, vals), nil
	}
	vals := newBuffer(c.mem, int(total))
	vb := vals.Bytes()
	at, j := int32(0), 0
	for i := range n {
		o[i] = at
		if valid == nil || valid[i] {
			x := ids[j]
			j++
			at += int32(copy(vb[at:], c.dict[c.offs[x]:c.offs[x+1]]))
		}
	}
	o[n] = at
	return varArray(c.mem, c.dt, n, valid, offs, vals), nil
}

// orcEpoch is 2015-01-01 00:00:00 UTC: timestamps are stored in seconds
// from it.
const orcEpoch = 1420070400

type timestampColumn struct {
	base
	secs, nanos intReader
	loc         *time.Location
	s, ns       []int64
	// baseOffset is the writer zone's offset at the epoch, as the writer
	// subtracted it.
	baseOffset int64
	baseSet    bool
}

func (c *timestampColumn) next(n int, parentNull []bool) (arrow.Array, error) {
	valid, count, err := c.presence(n, parentNull)
	if err != nil {
		return nil, err
	}
	if cap(c.s) < count {
		c.s, c.ns = make([]int64, count), make([]int64, count)
	}
	secs, nanos := c.s[:count], c.ns[:count]
	if err := c.secs.next(secs); err != nil {
		return nil, fmt.Errorf("DATA: %w", err)
	}
	if err := c.nanos.next(nanos); err != nil {
		return nil, fmt.Errorf("SECONDARY: %w", err)
	}
	if !c.baseSet {
		_, off := time.Date(2015, 1, 1, 0, 0, 0, 0, c.loc).Zone()
		c.baseOffset, c.baseSet = int64(off), true
	}
	buf := newBuffer(c.mem, 8*n)
	out := arrow.GetData[int64](buf.Bytes())
	local := c.dt.(*arrow.TimestampType).TimeZone == ""
	for i := range count {
		ns := nanos[i]
		zeros := ns & 7
		ns >>= 3
		if zeros != 0 {
			for range zeros + 1 {
				ns *= 10
			}
		}
		if ns < 0 || ns > 999_999_999 {
			buf.Release()
			return nil, fmt.Errorf("SECONDARY: %d nanoseconds", ns)
		}
		// The writer stored seconds of its own wall clock from 2015 in its
		// zone: the instant is those seconds after 2015 began there.
		sec := secs[i]
		if sec > math.MaxInt64/2 || sec < math.MinInt64/2 {
			buf.Release()
			return nil, fmt.Errorf("DATA: timestamp of %d seconds", sec)
		}
		sec += orcEpoch
		if local {
			sec -= c.baseOffset
			_, off := time.Unix(sec, 0).In(c.loc).Zone()
			sec += int64(off) // back to the writer's wall clock
		}
		// Writers truncated negative times toward zero, to the second
		// after the value's when it had a fraction of a millisecond or more.
		if sec < 0 && ns > 999_999 {
			sec--
		}
		hi, lo := bits.Mul64(uint64(abs(sec)), 1e9)
		if hi != 0 || lo > math.MaxInt64-1e9 {
			buf.Release()
			return nil, fmt.Errorf("DATA: timestamp of %d seconds is outside what nanoseconds from 1970 hold (years 1678 to 2261)", sec)
		}
		out[i] = sec*1e9 + ns
	}
	scatter(out, valid, count)
	return fixedArray(c.mem, c.dt, n, valid, buf), nil
}

func abs(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}

type decimalColumn struct {
	base
	precision, scale int32
	// small reads decimal64 files' integers; else data holds unbounded
	// varints with a scale each in scales.
	small  intReader
	data   []byte
	pos    int
	scales intReader
}

var (
	maxDecimal = new(big.Int).Sub(new(big.Int).Exp(big.NewInt(10), big.NewInt(38), nil), big.NewInt(1))
	bigTen     = big.NewInt(10)
)

func (c *decimalColumn) next(n int, parentNull []bool) (arrow.Array, error) {
	valid, count, err := c.presence(n, parentNull)
	if err != nil {
		return nil, err
	}
	buf := newBuffer(c.mem, 16*n)
	out := arrow.GetData[decimal128.Num](buf.Bytes())
	fail := func(err error) (arrow.Array, error) {
		buf.Release()
		return nil, err
	}
	if c.small != nil {
		vals := make([]int64, count)
		if err := c.small.next(vals); err != nil {
			return fail(fmt.Errorf("DATA: %w", err))
		}
		for i, v := range vals {
			out[i] = decimal128.FromI64(v)
		}
		scatter(out, valid, count)
		return fixedArray(c.mem, c.dt, n, valid, buf), nil
	}
	scratch, scales, err := nextInts(c.scales, count, "SECONDARY")
	if err != nil {
		return fail(err)
	}
	defer intScratch.Put(scratch)
	var v big.Int
	for i := range count {
		num, err := c.varint(&v)
		if err != nil {
			return fail(fmt.Errorf("DATA: %w", err))
		}
		shift := int64(c.scale) - scales[i]
		if shift < -76 || shift > 76 {
			return fail(fmt.Errorf("SECONDARY: scale %d", scales[i]))
		}
		if num != nil && shift == 0 {
			out[i] = *num
			continue
		}
		if shift > 0 {
			v.Mul(&v, new(big.Int).Exp(bigTen, big.NewInt(shift), nil))
		} else if shift < 0 {
			// Rounded half away from zero, as ORC's readers do.
			d := new(big.Int).Exp(bigTen, big.NewInt(-shift), nil)
			q, r := new(big.Int).QuoRem(&v, d, new(big.Int))
			if r.Mul(r.Abs(r), big.NewInt(2)).Cmp(d) >= 0 {
				q.Add(q, big.NewInt(int64(v.Sign())))
			}
			v.Set(q)
		}
		if new(big.Int).Abs(&v).Cmp(maxDecimal) > 0 {
			return fail(fmt.Errorf("DATA: decimal %s has more than 38 digits", v.String()))
		}
		out[i] = decimal128.FromBigInt(&v)
	}
	scatter(out, valid, count)
	return fixedArray(c.mem, c.dt, n, valid, buf), nil
}

// varint reads one zigzag varint of any length into v; where it fits in
// 64 bits it also returns it as a decimal directly.
func (c *decimalColumn) varint(v *big.Int) (*decimal128.Num, error) {
	start := c.pos
	end := start
	for {
		if end >= len(c.data) {
			return nil, errShort
		}
		if end-start >= 19 { // 133 bits: more than any 38-digit decimal needs
			return nil, errors.New("decimal varint longer than 128 bits")
		}
		if c.data[end] < 0x80 {
			break
		}
		end++
	}
	c.pos = end + 1
	if end-start < 9 {
		p := start
		u, err := readUvarint(c.data, &p)
		if err != nil {
			return nil, err
		}
		x := unzigzag(u)
		v.SetInt64(x)
		num := decimal128.FromI64(x)
		return &num, nil
	}
	v.SetInt64(0)
	for i := end; i >= start; i-- {
		v.Lsh(v, 7)
		v.Or(v, big.NewInt(int64(c.data[i]&0x7f)))
	}
	neg := v.Bit(0) == 1
	v.Rsh(v, 1)
	if neg {
		v.Not(v) // -(v+1): the zigzag of a negative number
	}
	return nil, nil
}

// listColumn reads lists and maps: lengths, then the children's values.
type listColumn struct {
	base
	lengths  intReader
	children []column
}

func (c *listColumn) next(n int, parentNull []bool) (arrow.Array, error) {
	valid, count, err := c.presence(n, parentNull)
	if err != nil {
		return nil, err
	}
	scratch, lens, err := nextInts(c.lengths, count, "LENGTH")
	if err != nil {
		return nil, err
	}
	defer intScratch.Put(scratch)
	offs := newBuffer(c.mem, 4*(n+1))
	o := arrow.GetData[int32](offs.Bytes())
	var at int64
	j := 0
	for i := range n {
		o[i] = int32(at)
		if valid == nil || valid[i] {
			l := lens[j]
			j++
			if l < 0 || l > math.MaxInt32-at {
				offs.Release()
				return nil, fmt.Errorf("LENGTH: list of %d values", l)
			}
			at += l
		}
	}
	o[n] = int32(at)
	kids := make([]arrow.Array, len(c.children))
	defer func() {
		for _, k := range kids {
			if k != nil {
				k.Release()
			}
		}
	}()
	for i, ch := range c.children {
		if kids[i], err = ch.next(int(at), nil); err != nil {
			offs.Release()
			return nil, err
		}
	}
	if len(kids) == 2 && kids[0].NullN() > 0 {
		// Arrow's maps have no null keys (building one panics); ORC's
		// format has no rule against a PRESENT stream on the keys.
		offs.Release()
		return nil, errors.New("a map key is null")
	}
	vb, nulls := validityBuffer(c.mem, valid)
	var child arrow.ArrayData
	if len(kids) == 2 {
		mt := c.dt.(*arrow.MapType)
		sd := array.NewData(mt.Elem(), int(at), []*memory.Buffer{nil}, []arrow.ArrayData{kids[0].Data(), kids[1].Data()}, 0, 0)
		defer sd.Release()
		child = sd
	} else {
		child = kids[0].Data()
	}
	data := array.NewData(c.dt, n, []*memory.Buffer{vb, offs}, []arrow.ArrayData{child}, nulls, 0)
	if vb != nil {
		vb.Release()
	}
	offs.Release()
	defer data.Release()
	return array.MakeFromData(data), nil
}

type structColumn struct {
	base
	children []column
}

func (c *structColumn) next(n int, parentNull []bool) (arrow.Array, error) {
	valid, _, err := c.presence(n, parentNull)
	if err != nil {
		return nil, err
	}
	nulls := nullsOf(valid)
	kids := make([]arrow.ArrayData, len(c.children))
	defer func() {
		for _, k := range kids {
			if k != nil {
				k.Release()
			}
		}
	}()
	for i, ch := range c.children {
		a, err := ch.next(n, nulls)
		if err != nil {
			return nil, err
		}
		kids[i] = a.Data()
		kids[i].Retain()
		a.Release()
	}
	vb, nn := validityBuffer(c.mem, valid)
	data := array.NewData(c.dt, n, []*memory.Buffer{vb}, kids, nn, 0)
	if vb != nil {
		vb.Release()
	}
	defer data.Release()
	return array.MakeFromData(data), nil
}

// unionColumn reads a union into an Arrow dense union. Arrow unions have no
// nulls of their own: a null union row becomes a null of the first
// variant.
type unionColumn struct {
	base
	tags     byteRLE
	children []column
}

func (c *unionColumn) next(n int, parentNull []bool) (arrow.Array, error) {
	valid, count, err := c.presence(n, parentNull)
	if err != nil {
		return nil, err
	}
	tags := make([]byte, count)
	if err := c.tags.next(tags); err != nil {
		return nil, fmt.Errorf("DATA: %w", err)
	}
	typeIDs := newBuffer(c.mem, n)
	ids := typeIDs.Bytes()
	offBuf := newBuffer(c.mem, 4*n)
	offs := arrow.GetData[int32](offBuf.Bytes())
	counts := make([]int32, len(c.children))
	// rows of each variant, and which of them are nulls of the union.
	nullRows := make([][]bool, len(c.children))
	j := 0
	for i := range n {
		tag := 0
		isNull := valid != nil && !valid[i]
		if !isNull {
			tag = int(tags[j])
			j++
			if tag >= len(c.children) {
				typeIDs.Release()
				offBuf.Release()
				return nil, fmt.Errorf("DATA: tag %d of a union of %d", tag, len(c.children))
			}
		}
		ids[i] = byte(tag)
		offs[i] = counts[tag]
		counts[tag]++
		nullRows[tag] = append(nullRows[tag], isNull)
	}
	kids := make([]arrow.Array, len(c.children))
	defer func() {
		for _, k := range kids {
			if k != nil {
				k.Release()
			}
		}
	}()
	for i, ch := range c.children {
		var pn []bool
		if i == 0 && valid != nil {
			pn = nullRows[0]
		}
		if kids[i], err = ch.next(int(counts[i]), pn); err != nil {
			typeIDs.Release()
			offBuf.Release()
			return nil, err
		}
	}
	out := array.NewDenseUnion(c.dt.(*arrow.DenseUnionType), n, kids, typeIDs, offBuf, 0)
	typeIDs.Release()
	offBuf.Release()
	return out, nil
}

// skipBools skips a boolean stream's position: whole bytes of its first
// run, then bits of the next byte.
func skipBools(r *boolRLE, pos []uint64) error {
	if len(pos) < 2 {
		return nil
	}
	return r.skip(int(min(pos[0], 1<<20)*8 + min(pos[1], 7)))
}

func skipBytes(r *byteRLE, pos []uint64) error {
	if len(pos) < 1 {
		return nil
	}
	return r.skip(int(min(pos[0], 1<<20)))
}
