package govalue

import (
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/extensions"
	"github.com/apache/arrow-go/v18/arrow/float16"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Every type of the table reads back as its documented Go value, through
// KindOf and the accessor of its kind.
func TestTable(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	one := func(dt arrow.DataType, add func(array.Builder)) arrow.Array {
		b := array.NewBuilder(mem, dt)
		defer b.Release()
		add(b)
		return b.NewArray()
	}
	cases := []struct {
		arr  arrow.Array
		kind Kind
		want any
	}{
		{one(arrow.PrimitiveTypes.Int8, func(b array.Builder) { b.(*array.Int8Builder).Append(-8) }), AsInt64, int64(-8)},
		{one(arrow.PrimitiveTypes.Int16, func(b array.Builder) { b.(*array.Int16Builder).Append(-16) }), AsInt64, int64(-16)},
		{one(arrow.PrimitiveTypes.Int32, func(b array.Builder) { b.(*array.Int32Builder).Append(-32) }), AsInt64, int64(-32)},
		{one(arrow.PrimitiveTypes.Int64, func(b array.Builder) { b.(*array.Int64Builder).Append(-1 << 62) }), AsInt64, int64(-1 << 62)},
		{one(arrow.PrimitiveTypes.Uint8, func(b array.Builder) { b.(*array.Uint8Builder).Append(255) }), AsInt64, int64(255)},
		{one(arrow.PrimitiveTypes.Uint16, func(b array.Builder) { b.(*array.Uint16Builder).Append(65535) }), AsInt64, int64(65535)},
		{one(arrow.PrimitiveTypes.Uint32, func(b array.Builder) { b.(*array.Uint32Builder).Append(1<<32 - 1) }), AsInt64, int64(1<<32 - 1)},
		{one(arrow.PrimitiveTypes.Uint64, func(b array.Builder) { b.(*array.Uint64Builder).Append(1<<64 - 1) }), AsUint64, uint64(1<<64 - 1)},
		{one(arrow.FixedWidthTypes.Float16, func(b array.Builder) { b.(*array.Float16Builder).Append(float16.New(0.5)) }), AsFloat64, 0.5},
		{one(arrow.PrimitiveTypes.Float32, func(b array.Builder) { b.(*array.Float32Builder).Append(0.1) }), AsFloat64, float64(float32(0.1))},
		{one(arrow.PrimitiveTypes.Float64, func(b array.Builder) { b.(*array.Float64Builder).Append(0.1) }), AsFloat64, 0.1},
		{one(arrow.FixedWidthTypes.Boolean, func(b array.Builder) { b.(*array.BooleanBuilder).Append(true) }), AsBool, true},
		{one(arrow.BinaryTypes.String, func(b array.Builder) { b.(*array.StringBuilder).Append("s") }), AsString, "s"},
		{one(arrow.BinaryTypes.LargeString, func(b array.Builder) { b.(*array.LargeStringBuilder).Append("ls") }), AsString, "ls"},
		{one(arrow.BinaryTypes.StringView, func(b array.Builder) { b.(*array.StringViewBuilder).Append("sv") }), AsString, "sv"},
		{one(arrow.BinaryTypes.Binary, func(b array.Builder) { b.(*array.BinaryBuilder).Append([]byte("b")) }), AsBytes, "b"},
		{one(arrow.BinaryTypes.LargeBinary, func(b array.Builder) { b.(*array.BinaryBuilder).Append([]byte("lb")) }), AsBytes, "lb"},
		{one(arrow.BinaryTypes.BinaryView, func(b array.Builder) { b.(*array.BinaryViewBuilder).Append([]byte("bv")) }), AsBytes, "bv"},
		{one(&arrow.FixedSizeBinaryType{ByteWidth: 2}, func(b array.Builder) { b.(*array.FixedSizeBinaryBuilder).Append([]byte("fb")) }), AsBytes, "fb"},
		{one(arrow.FixedWidthTypes.Date32, func(b array.Builder) { b.(*array.Date32Builder).Append(1) }), AsTime, time.Unix(86400, 0).UTC()},
		{one(arrow.FixedWidthTypes.Date64, func(b array.Builder) { b.(*array.Date64Builder).Append(86_400_000) }), AsTime, time.Unix(86400, 0).UTC()},
		{one(&arrow.TimestampType{Unit: arrow.Millisecond, TimeZone: "+05:30"}, func(b array.Builder) { b.(*array.TimestampBuilder).Append(1500) }), AsTime,
			time.UnixMilli(1500).In(time.FixedZone("+05:30", 5*3600+1800))},
		{one(&arrow.TimestampType{Unit: arrow.Nanosecond}, func(b array.Builder) { b.(*array.TimestampBuilder).Append(-1) }), AsTime, time.Unix(0, -1).UTC()},
		{one(arrow.Null, func(b array.Builder) { b.AppendNull() }), AsNil, nil},
		{one(arrow.ListOf(arrow.PrimitiveTypes.Int8), func(b array.Builder) { b.AppendNull() }), None, nil},
		{one(&arrow.Decimal128Type{Precision: 5, Scale: 2}, func(b array.Builder) { b.AppendNull() }), None, nil},
		{one(extensions.NewUUIDType(), func(b array.Builder) { b.AppendNull() }), None, nil},
	}
	for _, c := range cases {
		defer c.arr.Release()
		dt := c.arr.DataType()
		if k := KindOf(dt); k != c.kind {
			t.Errorf("%s: kind %v, want %v", dt, k, c.kind)
			continue
		}
		var got any
		switch c.kind {
		case AsInt64:
			got = Int64(c.arr, 0)
		case AsUint64:
			got = Uint64(c.arr, 0)
		case AsFloat64:
			got = Float64(c.arr, 0)
		case AsBool:
			got = Bool(c.arr, 0)
		case AsString:
			got = String(c.arr, 0)
		case AsBytes:
			got = string(Bytes(c.arr, 0))
		case AsTime:
			conv, err := TimeOf(dt)
			if err != nil {
				t.Fatalf("%s: %v", dt, err)
			}
			var v int64
			switch a := c.arr.(type) {
			case *array.Date32:
				v = int64(a.Value(0))
			case *array.Date64:
				v = int64(a.Value(0))
			case *array.Timestamp:
				v = int64(a.Value(0))
				if ty := dt.(*arrow.TimestampType); !Instant(v, ty.Unit).Equal(c.want.(time.Time)) {
					t.Errorf("%s: Instant(%d) = %v, want the instant of %v", dt, v, Instant(v, ty.Unit), c.want)
				}
			}
			tm, want := conv(v), c.want.(time.Time)
			if !tm.Equal(want) || tm.Location().String() != want.Location().String() {
				t.Errorf("%s: %v, want %v", dt, tm, want)
			}
			continue
		}
		if got != c.want {
			t.Errorf("%s: %#v, want %#v", dt, got, c.want)
		}
	}
	if _, err := TimeOf(&arrow.TimestampType{Unit: arrow.Second, TimeZone: "Nowhere/Atlantis"}); err == nil {
		t.Error("an unknown time zone converts")
	}
}
