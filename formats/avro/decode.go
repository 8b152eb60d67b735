package avro

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/big"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/decimal256"
	"github.com/apache/arrow-go/v18/arrow/extensions"
)

// cursor reads Avro's binary encoding from a block's objects. The first
// error sticks: every later read returns zero values, so that decoders
// check once an object, not once a value.
type cursor struct {
	b   []byte
	p   int
	err error
}

var (
	errEnd      = errors.New("the data ends inside a value")
	errVarint   = errors.New("a variable-length integer of more than 64 bits")
	errNegative = errors.New("a negative length")
)

func (c *cursor) fail(err error) {
	if c.err == nil {
		c.err = err
	}
	c.p = len(c.b)
}

// long reads a zig-zag varint.
func (c *cursor) long() int64 {
	var u uint64
	for i, s := 0, uint(0); i < 10; i, s = i+1, s+7 {
		if c.p >= len(c.b) {
			c.fail(errEnd)
			return 0
		}
		b := c.b[c.p]
		c.p++
		if b < 0x80 {
			if i == 9 && b > 1 {
				break
			}
			u |= uint64(b) << s
			return int64(u>>1) ^ -int64(u&1)
		}
		u |= uint64(b&0x7f) << s
	}
	c.fail(errVarint)
	return 0
}

func (c *cursor) int() int32 {
	v := c.long()
	if v < math.MinInt32 || v > math.MaxInt32 {
		c.fail(fmt.Errorf("int %d out of the range of 32 bits", v))
		return 0
	}
	return int32(v)
}

// take returns the next n bytes.
func (c *cursor) take(n int) []byte {
	if n > len(c.b)-c.p {
		c.fail(errEnd)
		return nil
	}
	b := c.b[c.p : c.p+n : c.p+n]
	c.p += n
	return b
}

// bytes reads a length-prefixed value.
func (c *cursor) bytes() []byte {
	n := c.long()
	if n < 0 {
		c.fail(errNegative)
		return nil
	}
	if n > int64(len(c.b)-c.p) {
		c.fail(errEnd)
		return nil
	}
	return c.take(int(n))
}

func (c *cursor) str() []byte {
	b := c.bytes()
	if !utf8.Valid(b) {
		c.fail(fmt.Errorf("a string that is not valid UTF-8 (%q)", b[:min(len(b), 32)]))
		return nil
	}
	return b
}

func (c *cursor) boolean() bool {
	b := c.take(1)
	if len(b) == 0 {
		return false
	}
	if b[0] > 1 {
		c.fail(fmt.Errorf("a boolean byte %d (not 0 or 1)", b[0]))
	}
	return b[0] == 1
}

// branch reads a union's branch index.
func (c *cursor) branch(n int) int {
	i := c.long()
	if i < 0 || i >= int64(n) {
		if c.err == nil {
			c.fail(fmt.Errorf("union branch %d of a union of %d types", i, n))
		}
		return -1
	}
	return int(i)
}

// items reads the count of the next block of an array's or map's items,
// 0 at the end, checked against the bytes left: each item takes at least
// min bytes.
func (c *cursor) items(min int64) int64 {
	n := c.long()
	if n < 0 {
		n = -n
		if c.long() < 0 { // the block's size in bytes, for skipping
			c.fail(errNegative)
			return 0
		}
	}
	if n < 0 || (min > 0 && n > int64(len(c.b)-c.p)/min) || (min == 0 && n > maxZeroWidth) {
		c.fail(fmt.Errorf("%d items in the %d bytes left", n, len(c.b)-c.p))
		return 0
	}
	return n
}

// dec decodes one value into the builder it was made for.
type dec func(c *cursor)

// minSize is the fewest bytes a value of n takes.
func minSize(n *node) int64 {
	switch n.kind {
	case kNull:
		return 0
	case kFloat:
		return 4
	case kDouble:
		return 8
	case kFixed:
		return int64(n.size)
	case kRecord:
		var s int64
		for _, f := range n.fields {
			s += minSize(f.typ)
		}
		return s
	}
	return 1
}

// decoder makes the decoder of n's values into b, a builder of n.arrow.
func decoder(n *node, b array.Builder) dec {
	switch n.kind {
	case kNull:
		return func(*cursor) { b.AppendNull() }
	case kBoolean:
		bb := b.(*array.BooleanBuilder)
		return func(c *cursor) { bb.Append(c.boolean()) }
	case kInt:
		switch bb := b.(type) {
		case *array.Date32Builder:
			return func(c *cursor) { bb.Append(arrow.Date32(c.int())) }
		case *array.Time32Builder:
			return func(c *cursor) { bb.Append(arrow.Time32(c.int())) }
		case *array.Int32Builder:
			return func(c *cursor) { bb.Append(c.int()) }
		}
	case kLong:
		switch bb := b.(type) {
		case *array.TimestampBuilder:
			return func(c *cursor) { bb.Append(arrow.Timestamp(c.long())) }
		case *array.Time64Builder:
			return func(c *cursor) { bb.Append(arrow.Time64(c.long())) }
		case *array.Int64Builder:
			return func(c *cursor) { bb.Append(c.long()) }
		}
	case kFloat:
		bb := b.(*array.Float32Builder)
		return func(c *cursor) {
			if v := c.take(4); v != nil {
				bb.Append(math.Float32frombits(binary.LittleEndian.Uint32(v)))
			}
		}
	case kDouble:
		bb := b.(*array.Float64Builder)
		return func(c *cursor) {
			if v := c.take(8); v != nil {
				bb.Append(math.Float64frombits(binary.LittleEndian.Uint64(v)))
			}
		}
	case kBytes, kFixed:
		return bytesDecoder(n, b)
	case kString:
		bb := b.(*array.StringBuilder)
		return func(c *cursor) {
			if v := c.str(); c.err == nil {
				bb.BinaryBuilder.Append(v)
			}
		}
	case kEnum:
		bb := b.(*array.StringBuilder)
		return func(c *cursor) {
			i := c.long()
			if i < 0 || i >= int64(len(n.symbols)) {
				c.fail(fmt.Errorf("enum %s symbol %d of %d", n.name, i, len(n.symbols)))
				return
			}
			bb.Append(n.symbols[i])
		}
	case kRecord:
		sb := b.(*array.StructBuilder)
		fs := make([]dec, len(n.fields))
		for i, f := range n.fields {
			fs[i] = decoder(f.typ, sb.FieldBuilder(i))
		}
		return func(c *cursor) {
			sb.Append(true)
			for _, f := range fs {
				f(c)
			}
		}
	case kArray:
		if n.entries {
			return mapDecoder(b.(*array.MapBuilder), n.items.fields[0].typ, n.items.fields[1].typ)
		}
		lb := b.(*array.ListBuilder)
		item, least := decoder(n.items, lb.ValueBuilder()), minSize(n.items)
		return func(c *cursor) {
			lb.Append(true)
			for k := c.items(least); k > 0 && c.err == nil; k = c.items(least) {
				for ; k > 0 && c.err == nil; k-- {
					item(c)
				}
			}
		}
	case kMap:
		return mapDecoder(b.(*array.MapBuilder), &node{kind: kString}, n.items)
	case kUnion:
		return unionDecoder(n, b)
	}
	panic(fmt.Sprintf("avro: no decoder of %s into %T", describe(n), b))
}

// mapDecoder decodes a map (or Iceberg's array of key-value records)
// whose keys are key and values val.
func mapDecoder(mb *array.MapBuilder, key, val *node) dec {
	k, v := decoder(key, mb.KeyBuilder()), decoder(val, mb.ItemBuilder())
	least := minSize(key) + minSize(val)
	return func(c *cursor) {
		mb.Append(true)
		for n := c.items(least); n > 0 && c.err == nil; n = c.items(least) {
			for ; n > 0 && c.err == nil; n-- {
				k(c)
				v(c)
			}
		}
	}
}

func unionDecoder(n *node, b array.Builder) dec {
	count := len(n.branches)
	switch {
	case count == 1:
		inner := decoder(n.branches[0], b)
		return func(c *cursor) {
			if c.branch(1) == 0 {
				inner(c)
			}
		}
	case n.value >= 0:
		inner, null, value := decoder(n.branches[n.value], b), n.null, n.value
		return func(c *cursor) {
			switch c.branch(2) {
			case null:
				b.AppendNulls(1) // a struct's children too
			case value:
				inner(c)
			}
		}
	}
	ub := b.(*array.DenseUnionBuilder)
	bs := make([]dec, count)
	for i, br := range n.branches {
		bs[i] = decoder(br, ub.Child(i))
	}
	return func(c *cursor) {
		if i := c.branch(count); i >= 0 {
			ub.Append(arrow.UnionTypeCode(i))
			bs[i](c)
		}
	}
}

func bytesDecoder(n *node, b array.Builder) dec {
	read := func(c *cursor) []byte { return c.bytes() }
	if n.kind == kFixed {
		size := n.size
		read = func(c *cursor) []byte { return c.take(size) }
	}
	switch bb := b.(type) {
	case *array.BinaryBuilder:
		return func(c *cursor) {
			if v := read(c); c.err == nil {
				bb.Append(v)
			}
		}
	case *array.FixedSizeBinaryBuilder:
		return func(c *cursor) {
			if v := read(c); c.err == nil {
				bb.Append(v)
			}
		}
	case *extensions.UUIDBuilder:
		return func(c *cursor) {
			if v := read(c); c.err == nil {
				bb.AppendBytes([16]byte(v))
			}
		}
	case *array.Decimal128Builder:
		return func(c *cursor) {
			if v := read(c); c.err == nil {
				d, err := decimal128From(v, n.precision)
				if err != nil {
					c.fail(err)
					return
				}
				bb.Append(d)
			}
		}
	case *array.Decimal256Builder:
		return func(c *cursor) {
			if v := read(c); c.err == nil {
				d, err := decimal256From(v, n.precision)
				if err != nil {
					c.fail(err)
					return
				}
				bb.Append(d)
			}
		}
	case *array.MonthDayNanoIntervalBuilder:
		return func(c *cursor) {
			v := read(c)
			if c.err != nil {
				return
			}
			months, days := binary.LittleEndian.Uint32(v), binary.LittleEndian.Uint32(v[4:])
			if months > math.MaxInt32 || days > math.MaxInt32 {
				c.fail(fmt.Errorf("a duration of %d months and %d days, more than Arrow's intervals hold", months, days))
				return
			}
			ms := binary.LittleEndian.Uint32(v[8:])
			bb.Append(arrow.MonthDayNanoInterval{Months: int32(months), Days: int32(days), Nanoseconds: int64(ms) * 1e6})
		}
	}
	panic(fmt.Sprintf("avro: no decoder of %s into %T", describe(n), b))
}

// signExtended reports whether v's leading bytes, all but the last keep,
// are only the sign of the rest (so that the value fits in keep bytes).
func signExtended(v []byte, keep int) bool {
	if len(v) <= keep {
		return true
	}
	var fill byte
	if v[len(v)-keep]&0x80 != 0 {
		fill = 0xff
	}
	for _, b := range v[:len(v)-keep] {
		if b != fill {
			return false
		}
	}
	return true
}

// beWords reads a big-endian two's complement integer of at most 8*len(out)
// bytes into out's little-endian 64-bit words, sign-extended.
func beWords(v []byte, out []uint64) {
	var fill uint64
	if len(v) > 0 && v[0]&0x80 != 0 {
		fill = math.MaxUint64
	}
	for i := range out {
		out[i] = fill
	}
	for i := 0; i < len(v); i++ {
		b := uint64(v[len(v)-1-i])
		w, s := i/8, uint(i%8)*8
		out[w] = out[w]&^(0xff<<s) | b<<s
	}
}

func decimal128From(v []byte, precision int32) (decimal128.Num, error) {
	if !signExtended(v, 16) {
		return decimal128.Num{}, fmt.Errorf("a decimal of %d bytes out of the range of decimal(%d)", len(v), precision)
	}
	v = v[max(0, len(v)-16):]
	var w [2]uint64
	beWords(v, w[:])
	d := decimal128.New(int64(w[1]), w[0])
	if !d.FitsInPrecision(precision) {
		return decimal128.Num{}, fmt.Errorf("a decimal %s of more than its %d digits", d.BigInt(), precision)
	}
	return d, nil
}

func decimal256From(v []byte, precision int32) (decimal256.Num, error) {
	if !signExtended(v, 32) {
		return decimal256.Num{}, fmt.Errorf("a decimal of %d bytes out of the range of decimal(%d)", len(v), precision)
	}
	v = v[max(0, len(v)-32):]
	var w [4]uint64
	beWords(v, w[:])
	d := decimal256.New(w[3], w[2], w[1], w[0])
	if !d.FitsInPrecision(precision) {
		return decimal256.Num{}, fmt.Errorf("a decimal %s of more than its %d digits", (*big.Int)(d.BigInt()), precision)
	}
	return d, nil
}

// skipper makes the function that reads past a value of n.
func skipper(n *node) dec {
	switch n.kind {
	case kNull:
		return func(*cursor) {}
	case kBoolean:
		return func(c *cursor) { c.take(1) }
	case kInt, kLong, kEnum:
		return func(c *cursor) { c.long() }
	case kFloat:
		return func(c *cursor) { c.take(4) }
	case kDouble:
		return func(c *cursor) { c.take(8) }
	case kBytes, kString:
		return func(c *cursor) { c.bytes() }
	case kFixed:
		size := n.size
		return func(c *cursor) { c.take(size) }
	case kRecord:
		fs := make([]dec, len(n.fields))
		for i, f := range n.fields {
			fs[i] = skipper(f.typ)
		}
		return func(c *cursor) {
			for _, f := range fs {
				f(c)
			}
		}
	case kArray, kMap:
		item, least := skipper(n.items), minSize(n.items)
		if n.kind == kMap {
			val := item
			item = func(c *cursor) { c.bytes(); val(c) }
			least++
		}
		return func(c *cursor) {
			for {
				k := c.long()
				switch {
				case k == 0 || c.err != nil:
					return
				case k < 0:
					// A block that gives its size is passed over whole.
					size := c.long()
					if size < 0 {
						c.fail(errNegative)
						return
					}
					if size > int64(len(c.b)-c.p) {
						c.fail(errEnd)
						return
					}
					c.p += int(size)
					continue
				}
				if (least > 0 && k > int64(len(c.b)-c.p)/least) || (least == 0 && k > maxZeroWidth) {
					c.fail(fmt.Errorf("%d items in the %d bytes left", k, len(c.b)-c.p))
					return
				}
				for ; k > 0 && c.err == nil; k-- {
					item(c)
				}
			}
		}
	case kUnion:
		bs := make([]dec, len(n.branches))
		for i, br := range n.branches {
			bs[i] = skipper(br)
		}
		return func(c *cursor) {
			if i := c.branch(len(bs)); i >= 0 {
				bs[i](c)
			}
		}
	}
	panic(fmt.Sprintf("avro: no skipper of %s", describe(n)))
}
