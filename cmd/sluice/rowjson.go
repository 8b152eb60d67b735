package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal"
	"github.com/apache/arrow-go/v18/arrow/extensions"
	"github.com/apache/arrow-go/v18/parquet/variant"

	"github.com/sluicedata/sluice/internal/govalue"
)

// rowEncoder writes the rows of record batches as JSON objects, one a line,
// under one mapping for every Arrow type (docs/cli.md's "JSON lines of sluice
// cat" documents it; cat's help sums it up):
//
//   - integers as JSON numbers, 64-bit ones in full; floats as numbers, with
//     NaN, +Inf and -Inf as the strings "NaN", "+Inf", "-Inf" (JSON has no
//     such numbers; Arrow's JSON writes them so);
//   - strings as strings; binary and fixed-size binary as base64;
//   - decimals as strings holding the exact value with the type's scale
//     ("1.50" for 1.5 in DECIMAL(p,2));
//   - dates as "2024-11-07"; times as "12:33:54.123456"; timestamps as ISO
//     8601, "2024-11-07T12:33:54.123456", with the zone when the type has one
//     ("Z" for UTC, else the zone's offset): always this form, whatever the
//     year; fractions of a second without trailing zeros;
//   - durations as integers in the type's unit;
//   - UUIDs in their canonical text form; JSON-annotated strings as the JSON
//     they hold (as a string where the text is not JSON);
//   - VARIANT values as JSON of their own types under these same rules (a
//     variant date as a date, a decimal as an exact string, binary as
//     base64);
//   - structs as objects with their fields in order, lists as arrays, maps
//     as arrays of {"key":..,"value":..} (keys need not be strings).
//
// Arrow's own RecordBatch.MarshalJSON goes through Go maps, so its keys come
// out sorted by name, and its per-type forms vary (a timestamp past 9999
// becomes a number, a variant date its day count): hence this encoder.
type rowEncoder struct {
	keys [][]byte // `"name":` per column, escaped once
}

func newRowEncoder(schema *arrow.Schema) *rowEncoder {
	e := &rowEncoder{}
	for i, f := range schema.Fields() {
		k := appendString(nil, f.Name)
		if i > 0 {
			k = append([]byte{','}, k...)
		}
		e.keys = append(e.keys, append(k, ':'))
	}
	return e
}

// appendRow appends row i of rec as one JSON object and a newline. A value
// that cannot be decoded (a malformed VARIANT) is an error naming its
// column: printing something else in its place would be a wrong row.
func (e *rowEncoder) appendRow(b []byte, rec arrow.RecordBatch, i int) ([]byte, error) {
	b = append(b, '{')
	for c, col := range rec.Columns() {
		b = append(b, e.keys[c]...)
		var err error
		if b, err = appendValue(b, col, i); err != nil {
			return b, fmt.Errorf("column %q: %w", rec.Schema().Field(c).Name, err)
		}
	}
	return append(b, '}', '\n'), nil
}

func appendValue(b []byte, a arrow.Array, i int) ([]byte, error) {
	if a.IsNull(i) {
		return append(b, "null"...), nil
	}
	// The types stream/typed gives Go values for become those values here,
	// by the same table, in their JSON form. Two forms are JSON's own:
	// binaries are base64, and a float16 or float32 prints as the shortest
	// decimal that reads back as its own width (0.1, not float64's
	// 0.10000000149011612), so it is formatted at that width.
	switch govalue.KindOf(a.DataType()) {
	case govalue.AsInt64:
		return strconv.AppendInt(b, govalue.Int64(a, i), 10), nil
	case govalue.AsUint64:
		return strconv.AppendUint(b, govalue.Uint64(a, i), 10), nil
	case govalue.AsFloat64:
		bits := 32
		if a.DataType().ID() == arrow.FLOAT64 {
			bits = 64
		}
		return appendFloat(b, govalue.Float64(a, i), bits), nil
	case govalue.AsBool:
		return strconv.AppendBool(b, govalue.Bool(a, i)), nil
	case govalue.AsString:
		return appendString(b, govalue.String(a, i)), nil
	case govalue.AsBytes:
		return appendBase64(b, govalue.Bytes(a, i)), nil
	}
	switch a := a.(type) {
	case *array.Decimal32:
		return appendDecimal(b, big.NewInt(int64(a.Value(i))), a.DataType().(arrow.DecimalType).GetScale()), nil
	case *array.Decimal64:
		return appendDecimal(b, big.NewInt(int64(a.Value(i))), a.DataType().(arrow.DecimalType).GetScale()), nil
	case *array.Decimal128:
		return appendDecimal(b, a.Value(i).BigInt(), a.DataType().(arrow.DecimalType).GetScale()), nil
	case *array.Decimal256:
		return appendDecimal(b, a.Value(i).BigInt(), a.DataType().(arrow.DecimalType).GetScale()), nil
	case *array.Date32:
		return appendTime(b, govalue.Date32(a.Value(i)), dateLayout), nil
	case *array.Date64:
		return appendTime(b, govalue.Date64(a.Value(i)), dateLayout), nil
	case *array.Time32:
		unit := a.DataType().(*arrow.Time32Type).Unit
		return appendTime(b, time.Unix(0, int64(a.Value(i))*int64(unit.Multiplier())).UTC(), timeLayout), nil
	case *array.Time64:
		unit := a.DataType().(*arrow.Time64Type).Unit
		return appendTime(b, time.Unix(0, int64(a.Value(i))*int64(unit.Multiplier())).UTC(), timeLayout), nil
	case *array.Timestamp:
		ty := a.DataType().(*arrow.TimestampType)
		return appendTimestamp(b, int64(a.Value(i)), ty.Unit, ty.TimeZone), nil
	case *array.Duration:
		return strconv.AppendInt(b, int64(a.Value(i)), 10), nil
	case *extensions.UUIDArray:
		return appendString(b, a.Value(i).String()), nil
	case *extensions.JSONArray:
		if s, ok := a.Storage().(*array.String); ok {
			return appendJSONText(b, []byte(s.Value(i))), nil
		}
		return appendJSONText(b, a.ValueBytes(i)), nil
	case *extensions.VariantArray:
		v, err := a.Value(i)
		if err != nil {
			return b, fmt.Errorf("undecodable VARIANT value: %w", err)
		}
		return appendVariant(b, v)
	case *array.Struct:
		st := a.DataType().(*arrow.StructType)
		b = append(b, '{')
		for f := range a.NumField() {
			if f > 0 {
				b = append(b, ',')
			}
			b = appendString(b, st.Field(f).Name)
			b = append(b, ':')
			var err error
			if b, err = appendValue(b, a.Field(f), i); err != nil {
				return b, err
			}
		}
		return append(b, '}'), nil
	case array.ListLike:
		// Lists of every kind, and maps, as arrays (a map's entries as
		// {"key":..,"value":..} objects: keys need not be strings).
		values := a.ListValues()
		start, end := a.ValueOffsets(i)
		b = append(b, '[')
		for j := start; j < end; j++ {
			if j > start {
				b = append(b, ',')
			}
			var err error
			if b, err = appendValue(b, values, int(j)); err != nil {
				return b, err
			}
		}
		return append(b, ']'), nil
	case *array.Dictionary:
		return appendValue(b, a.Dictionary(), a.GetValueIndex(i))
	case *array.RunEndEncoded:
		return appendValue(b, a.Values(), a.GetPhysicalIndex(i))
	case array.ExtensionArray:
		// An extension sluice has no form for is printed as its storage.
		return appendValue(b, a.Storage(), i)
	}
	v, err := json.Marshal(a.GetOneForMarshal(i))
	if err != nil {
		// Arrow has no JSON for this value; its text form is still
		// better than dropping the row.
		return appendString(b, a.ValueStr(i)), nil
	}
	return append(b, v...), nil
}

const (
	dateLayout = "2006-01-02"
	timeLayout = "15:04:05.999999999"
)

func appendTime(b []byte, t time.Time, layout string) []byte {
	b = append(b, '"')
	b = t.AppendFormat(b, layout)
	return append(b, '"')
}

// appendTimestamp appends v (in unit since the epoch) in ISO 8601: without
// a zone for a timestamp without one, with "Z" for UTC, else with the
// offset of zone at that instant. The instant is govalue's; the zone is
// resolved here rather than by govalue.TimeOf, because a row is printed
// even where the zone is unknown (in UTC), where typed refuses the column,
// and because VARIANT timestamps, which have no Arrow type, come here too.
func appendTimestamp(b []byte, v int64, unit arrow.TimeUnit, zone string) []byte {
	t := govalue.Instant(v, unit)
	if zone == "" {
		return appendTime(b, t, "2006-01-02T15:04:05.999999999")
	}
	if zone != "UTC" && zone != "Z" && zone != "+00:00" && zone != "Etc/UTC" {
		if loc, err := loadZone(zone); err == nil {
			t = t.In(loc)
		}
	}
	return appendTime(b, t, "2006-01-02T15:04:05.999999999Z07:00")
}

// loadZone is time.LoadLocation for Arrow's zone strings, which are names
// ("Europe/Paris") or fixed offsets ("+02:00").
func loadZone(zone string) (*time.Location, error) {
	if len(zone) == 6 && (zone[0] == '+' || zone[0] == '-') && zone[3] == ':' {
		h, err1 := strconv.Atoi(zone[1:3])
		m, err2 := strconv.Atoi(zone[4:6])
		if err1 == nil && err2 == nil {
			off := h*3600 + m*60
			if zone[0] == '-' {
				off = -off
			}
			return time.FixedZone(zone, off), nil
		}
	}
	return time.LoadLocation(zone)
}

// appendDecimal appends the decimal unscaled/10^scale as an exact string.
func appendDecimal(b []byte, unscaled *big.Int, scale int32) []byte {
	b = append(b, '"')
	if unscaled.Sign() < 0 {
		b = append(b, '-')
		unscaled = new(big.Int).Neg(unscaled)
	}
	digits := unscaled.String()
	switch {
	case scale <= 0:
		b = append(b, digits...)
		for range -scale {
			b = append(b, '0')
		}
	case int(scale) >= len(digits):
		b = append(b, "0."...)
		for range int(scale) - len(digits) {
			b = append(b, '0')
		}
		b = append(b, digits...)
	default:
		b = append(b, digits[:len(digits)-int(scale)]...)
		b = append(b, '.')
		b = append(b, digits[len(digits)-int(scale):]...)
	}
	return append(b, '"')
}

func appendBase64(b, v []byte) []byte {
	b = append(b, '"')
	b = base64.StdEncoding.AppendEncode(b, v)
	return append(b, '"')
}

// appendJSONText appends a JSON-annotated value: the JSON it holds, made
// one line, or the text as a string where it is not valid JSON.
func appendJSONText(b, text []byte) []byte {
	if !json.Valid(text) {
		return appendString(b, string(text))
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, text); err != nil {
		return appendString(b, string(text))
	}
	return append(b, buf.Bytes()...)
}

// maxVariantDepth bounds the nesting of a VARIANT value: a malformed one
// must not exhaust the stack.
const maxVariantDepth = 1000

// appendVariant appends a VARIANT value under the mapping of the types it
// holds. arrow-go's own JSON prints an empty array as null and dates and
// timestamps as bare integers, and it panics on some malformed values: those
// become errors here.
func appendVariant(b []byte, v variant.Value) ([]byte, error) {
	// Values of a well-formed VARIANT do not share bytes: no more of them
	// than bytes. Forged offsets pointing children at shared bytes would
	// make the walk exponential.
	budget := len(v.Bytes()) + 1
	return appendVariantValue(b, v, 0, &budget)
}

func appendVariantValue(b []byte, v variant.Value, depth int, budget *int) (out []byte, err error) {
	if depth > maxVariantDepth {
		return b, fmt.Errorf("VARIANT nested more than %d deep", maxVariantDepth)
	}
	if *budget--; *budget < 0 {
		return b, errors.New("malformed VARIANT: more values than bytes")
	}
	defer func() {
		if r := recover(); r != nil {
			out, err = b, fmt.Errorf("malformed VARIANT value: %v", r)
		}
	}()
	switch v.Type() {
	case variant.Object:
		obj, ok := v.Value().(variant.ObjectValue)
		if !ok {
			return b, errors.New("malformed VARIANT object")
		}
		if int64(obj.NumElements()) > int64(len(v.Bytes())) {
			// An offset each: no more fields than bytes. arrow-go does not
			// check, and a forged count would take hours to walk.
			return b, fmt.Errorf("malformed VARIANT object: %d fields in %d bytes", obj.NumElements(), len(v.Bytes()))
		}
		b = append(b, '{')
		for k := range obj.NumElements() {
			f, err := obj.FieldAt(k)
			if err != nil {
				return b, fmt.Errorf("malformed VARIANT object: %w", err)
			}
			if k > 0 {
				b = append(b, ',')
			}
			b = appendString(b, f.Key)
			b = append(b, ':')
			if b, err = appendVariantValue(b, f.Value, depth+1, budget); err != nil {
				return b, err
			}
		}
		return append(b, '}'), nil
	case variant.Array:
		arr, ok := v.Value().(variant.ArrayValue)
		if !ok {
			return b, errors.New("malformed VARIANT array")
		}
		if int64(arr.Len()) > int64(len(v.Bytes())) {
			return b, fmt.Errorf("malformed VARIANT array: %d elements in %d bytes", arr.Len(), len(v.Bytes()))
		}
		b = append(b, '[')
		for k := range arr.Len() {
			e, err := arr.Value(k)
			if err != nil {
				return b, fmt.Errorf("malformed VARIANT array: %w", err)
			}
			if k > 0 {
				b = append(b, ',')
			}
			if b, err = appendVariantValue(b, e, depth+1, budget); err != nil {
				return b, err
			}
		}
		return append(b, ']'), nil
	case variant.Null:
		return append(b, "null"...), nil
	}
	switch x := v.Value().(type) {
	case bool:
		return strconv.AppendBool(b, x), nil
	case int8:
		return strconv.AppendInt(b, int64(x), 10), nil
	case int16:
		return strconv.AppendInt(b, int64(x), 10), nil
	case int32:
		return strconv.AppendInt(b, int64(x), 10), nil
	case int64:
		return strconv.AppendInt(b, x, 10), nil
	case float32:
		return appendFloat(b, float64(x), 32), nil
	case float64:
		return appendFloat(b, x, 64), nil
	case string:
		return appendString(b, x), nil
	case []byte:
		return appendBase64(b, x), nil
	case arrow.Date32:
		return appendTime(b, govalue.Date32(x), dateLayout), nil
	case arrow.Time64:
		return appendTime(b, time.UnixMicro(int64(x)).UTC(), timeLayout), nil
	case arrow.Timestamp:
		unit, zone := arrow.Microsecond, "UTC"
		switch v.Type() {
		case variant.TimestampMicrosNTZ:
			zone = ""
		case variant.TimestampNanos:
			unit = arrow.Nanosecond
		case variant.TimestampNanosNTZ:
			unit, zone = arrow.Nanosecond, ""
		}
		return appendTimestamp(b, int64(x), unit, zone), nil
	case fmt.Stringer:
		if v.Type() == variant.UUID {
			return appendString(b, x.String()), nil
		}
	case variant.DecimalValue[decimal.Decimal32]:
		if n, ok := x.Value.(decimal.Decimal32); ok {
			return appendDecimal(b, big.NewInt(int64(n)), int32(x.Scale)), nil
		}
	case variant.DecimalValue[decimal.Decimal64]:
		if n, ok := x.Value.(decimal.Decimal64); ok {
			return appendDecimal(b, big.NewInt(int64(n)), int32(x.Scale)), nil
		}
	case variant.DecimalValue[decimal.Decimal128]:
		if n, ok := x.Value.(decimal.Decimal128); ok {
			return appendDecimal(b, n.BigInt(), int32(x.Scale)), nil
		}
	}
	return b, fmt.Errorf("VARIANT value of unknown type %v", v.Type())
}

func appendFloat(b []byte, f float64, bits int) []byte {
	switch {
	case math.IsNaN(f):
		return append(b, `"NaN"`...)
	case math.IsInf(f, 1):
		return append(b, `"+Inf"`...)
	case math.IsInf(f, -1):
		return append(b, `"-Inf"`...)
	}
	return strconv.AppendFloat(b, f, 'g', -1, bits)
}

// appendString appends s as a JSON string. Invalid UTF-8 (Parquet does not
// check it) becomes U+FFFD, as encoding/json does; unlike encoding/json, <,
// > and & are left alone, since the output is not meant for HTML.
func appendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c == '\n':
				b = append(b, '\\', 'n')
			case c == '\r':
				b = append(b, '\\', 'r')
			case c == '\t':
				b = append(b, '\\', 't')
			case c < 0x20 || c == 0x7f:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			// Valid JSON, but JavaScript line terminators: escaped so that
			// a line of output is a line for every reader.
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xf])
		default:
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
}
