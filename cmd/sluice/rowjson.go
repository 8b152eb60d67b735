package main

import (
	"encoding/json"
	"math"
	"strconv"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// rowEncoder writes the rows of record batches as JSON objects, one a line.
//
// Arrow's own RecordBatch.MarshalJSON goes through Go maps, so its keys come
// out sorted by name, and encoding/json refuses NaN. Here keys follow the
// column order (and struct fields their declared order), and floats that JSON
// cannot hold are written the way Arrow's JSON writes them: the strings
// "NaN", "+Inf" and "-Inf". Types without a case below fall back to Arrow's
// per-value marshalling (decimals, dates and timestamps become strings,
// binary becomes base64).
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

// appendRow appends row i of rec as one JSON object and a newline.
func (e *rowEncoder) appendRow(b []byte, rec arrow.RecordBatch, i int) []byte {
	b = append(b, '{')
	for c, col := range rec.Columns() {
		b = append(b, e.keys[c]...)
		b = appendValue(b, col, i)
	}
	return append(b, '}', '\n')
}

func appendValue(b []byte, a arrow.Array, i int) []byte {
	if a.IsNull(i) {
		return append(b, "null"...)
	}
	switch a := a.(type) {
	case *array.Int8:
		return strconv.AppendInt(b, int64(a.Value(i)), 10)
	case *array.Int16:
		return strconv.AppendInt(b, int64(a.Value(i)), 10)
	case *array.Int32:
		return strconv.AppendInt(b, int64(a.Value(i)), 10)
	case *array.Int64:
		return strconv.AppendInt(b, a.Value(i), 10)
	case *array.Uint8:
		return strconv.AppendUint(b, uint64(a.Value(i)), 10)
	case *array.Uint16:
		return strconv.AppendUint(b, uint64(a.Value(i)), 10)
	case *array.Uint32:
		return strconv.AppendUint(b, uint64(a.Value(i)), 10)
	case *array.Uint64:
		return strconv.AppendUint(b, a.Value(i), 10)
	case *array.Float16:
		return appendFloat(b, float64(a.Value(i).Float32()), 32)
	case *array.Float32:
		return appendFloat(b, float64(a.Value(i)), 32)
	case *array.Float64:
		return appendFloat(b, a.Value(i), 64)
	case *array.Boolean:
		return strconv.AppendBool(b, a.Value(i))
	case *array.String:
		return appendString(b, a.Value(i))
	case *array.LargeString:
		return appendString(b, a.Value(i))
	case *array.StringView:
		return appendString(b, a.Value(i))
	case *array.Struct:
		st := a.DataType().(*arrow.StructType)
		b = append(b, '{')
		for f := range a.NumField() {
			if f > 0 {
				b = append(b, ',')
			}
			b = appendString(b, st.Field(f).Name)
			b = append(b, ':')
			b = appendValue(b, a.Field(f), i)
		}
		return append(b, '}')
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
			b = appendValue(b, values, int(j))
		}
		return append(b, ']')
	case *array.Dictionary:
		return appendValue(b, a.Dictionary(), a.GetValueIndex(i))
	case *array.RunEndEncoded:
		return appendValue(b, a.Values(), a.GetPhysicalIndex(i))
	}
	v, err := json.Marshal(a.GetOneForMarshal(i))
	if err != nil {
		// Arrow has no JSON for this value; its text form is still
		// better than dropping the row.
		return appendString(b, a.ValueStr(i))
	}
	return append(b, v...)
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
