// Package govalue is the one table of the Go value each Arrow type
// becomes. stream/typed's Rows gives these values and its Structs and
// Matrices check their conversions by the same kinds; cmd/sluice prints
// them as JSON. Types outside the table (lists, structs, maps, decimals,
// dictionaries, times of day, durations, extensions) are Kind None: each
// caller refuses them or has its own form for them.
package govalue

import (
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// Kind is the Go value an Arrow type becomes.
type Kind uint8

const (
	None      Kind = iota // not in the table
	AsInt64               // int8, int16, int32, int64, uint8, uint16, uint32
	AsUint64              // uint64, whose values may not fit int64
	AsFloat64             // float16, float32, float64
	AsBool                // bool
	AsString              // string, large_string, string_view
	AsBytes               // binary, large_binary, binary_view, fixed_size_binary
	AsTime                // time.Time: timestamp (any unit) in its zone, date32 and date64 at UTC
	AsNil                 // the null type
)

// KindOf is the kind of dt's values. An extension type is None whatever
// its storage: what it means is its own.
func KindOf(dt arrow.DataType) Kind {
	switch dt.ID() {
	case arrow.INT8, arrow.INT16, arrow.INT32, arrow.INT64, arrow.UINT8, arrow.UINT16, arrow.UINT32:
		return AsInt64
	case arrow.UINT64:
		return AsUint64
	case arrow.FLOAT16, arrow.FLOAT32, arrow.FLOAT64:
		return AsFloat64
	case arrow.BOOL:
		return AsBool
	case arrow.STRING, arrow.LARGE_STRING, arrow.STRING_VIEW:
		return AsString
	case arrow.BINARY, arrow.LARGE_BINARY, arrow.BINARY_VIEW, arrow.FIXED_SIZE_BINARY:
		return AsBytes
	case arrow.TIMESTAMP, arrow.DATE32, arrow.DATE64:
		return AsTime
	case arrow.NULL:
		return AsNil
	}
	return None
}

// IntBits is the width of an Arrow integer type, and whether it is signed;
// 0 for other types.
func IntBits(id arrow.Type) (bits int, signed bool) {
	switch id {
	case arrow.INT8:
		return 8, true
	case arrow.INT16:
		return 16, true
	case arrow.INT32:
		return 32, true
	case arrow.INT64:
		return 64, true
	case arrow.UINT8:
		return 8, false
	case arrow.UINT16:
		return 16, false
	case arrow.UINT32:
		return 32, false
	case arrow.UINT64:
		return 64, false
	}
	return 0, false
}

// The accessors below read value i of an array of their kind, which the
// caller has checked is not null; an array of another kind is a bug in the
// caller, and they panic on it. String and Bytes alias Arrow memory: copy
// what outlives the batch.

// Int64 is value i of an AsInt64 array.
func Int64(arr arrow.Array, i int) int64 {
	switch a := arr.(type) {
	case *array.Int8:
		return int64(a.Value(i))
	case *array.Int16:
		return int64(a.Value(i))
	case *array.Int32:
		return int64(a.Value(i))
	case *array.Int64:
		return a.Value(i)
	case *array.Uint8:
		return int64(a.Value(i))
	case *array.Uint16:
		return int64(a.Value(i))
	case *array.Uint32:
		return int64(a.Value(i))
	}
	panic(kindPanic(arr, AsInt64))
}

// Uint64 is value i of an AsUint64 array.
func Uint64(arr arrow.Array, i int) uint64 {
	if a, ok := arr.(*array.Uint64); ok {
		return a.Value(i)
	}
	panic(kindPanic(arr, AsUint64))
}

// Float64 is value i of an AsFloat64 array.
func Float64(arr arrow.Array, i int) float64 {
	switch a := arr.(type) {
	case *array.Float16:
		return float64(a.Value(i).Float32())
	case *array.Float32:
		return float64(a.Value(i))
	case *array.Float64:
		return a.Value(i)
	}
	panic(kindPanic(arr, AsFloat64))
}

// Bool is value i of an AsBool array.
func Bool(arr arrow.Array, i int) bool {
	if a, ok := arr.(*array.Boolean); ok {
		return a.Value(i)
	}
	panic(kindPanic(arr, AsBool))
}

// String is value i of an AsString array.
func String(arr arrow.Array, i int) string {
	switch a := arr.(type) {
	case *array.String:
		return a.Value(i)
	case *array.LargeString:
		return a.Value(i)
	case *array.StringView:
		return a.Value(i)
	}
	panic(kindPanic(arr, AsString))
}

// Bytes is value i of an AsBytes array.
func Bytes(arr arrow.Array, i int) []byte {
	switch a := arr.(type) {
	case *array.Binary:
		return a.Value(i)
	case *array.LargeBinary:
		return a.Value(i)
	case *array.BinaryView:
		return a.Value(i)
	case *array.FixedSizeBinary:
		return a.Value(i)
	}
	panic(kindPanic(arr, AsBytes))
}

// TimeOf is the conversion of an AsTime column's stored values to time.Time:
// a timestamp at its instant in the column's zone (UTC where it has none),
// a date at its midnight UTC. A timestamp zone that Arrow cannot resolve is
// an error.
func TimeOf(dt arrow.DataType) (func(v int64) time.Time, error) {
	switch t := dt.(type) {
	case *arrow.TimestampType:
		loc, err := t.GetZone()
		if err != nil {
			return nil, err
		}
		switch t.Unit {
		case arrow.Second:
			return func(v int64) time.Time { return time.Unix(v, 0).In(loc) }, nil
		case arrow.Millisecond:
			return func(v int64) time.Time { return time.UnixMilli(v).In(loc) }, nil
		case arrow.Microsecond:
			return func(v int64) time.Time { return time.UnixMicro(v).In(loc) }, nil
		default:
			return func(v int64) time.Time { return time.Unix(0, v).In(loc) }, nil
		}
	case *arrow.Date32Type:
		return func(v int64) time.Time { return Date32(arrow.Date32(v)) }, nil
	case *arrow.Date64Type:
		return func(v int64) time.Time { return Date64(arrow.Date64(v)) }, nil
	}
	panic("govalue: TimeOf of " + dt.String() + ", not a timestamp or date")
}

// Instant is v, a timestamp in unit since the epoch, at UTC.
func Instant(v int64, unit arrow.TimeUnit) time.Time {
	switch unit {
	case arrow.Second:
		return time.Unix(v, 0).UTC()
	case arrow.Millisecond:
		return time.UnixMilli(v).UTC()
	case arrow.Microsecond:
		return time.UnixMicro(v).UTC()
	}
	return time.Unix(0, v).UTC()
}

// Date32 is the midnight UTC of a date32 (days since the epoch).
func Date32(v arrow.Date32) time.Time { return time.Unix(int64(v)*86400, 0).UTC() }

// Date64 is the instant UTC of a date64 (milliseconds since the epoch).
func Date64(v arrow.Date64) time.Time { return time.UnixMilli(int64(v)).UTC() }

func kindPanic(arr arrow.Array, k Kind) string {
	return "govalue: " + arr.DataType().String() + " is not of kind " + k.String()
}

func (k Kind) String() string {
	return [...]string{"None", "AsInt64", "AsUint64", "AsFloat64", "AsBool", "AsString", "AsBytes", "AsTime", "AsNil"}[k]
}
