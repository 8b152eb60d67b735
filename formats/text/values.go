package text

import (
	"bytes"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// str views b as a string without copying, for the strconv parsers, which
// do not keep their argument.
func str(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

// guess is what inference knows of a CSV column: the types every value so
// far parses as, from the narrowest, and for dates and timestamps the
// orders of a date's fields every value fits (dates.go).
type guess uint32

const (
	gBool guess = 1 << iota
	gInt
	gFloat
	gTime
	gDate      = formsDate
	gTimestamp = formsTS
	gAll       = gBool | gInt | gFloat | gTime | gDate | gTimestamp
)

// observe narrows g by one non-null value, as DuckDB's sniffer casts it
// (strictly: an integer or a float has no '+' and no leading zero; an
// integer may have spaces around it, a float before it; a date, a time or
// a timestamp may have spaces around it; a boolean none).
func (g guess) observe(v []byte) guess {
	if g&gBool != 0 {
		if _, ok := parseBool(v, true); !ok {
			g &^= gBool
		}
	}
	if g&gInt != 0 {
		if _, ok := parseInt(v, true); !ok {
			g &^= gInt
		}
	}
	if g&gFloat != 0 {
		if _, ok := parseFloatAs(v, true); !ok {
			g &^= gFloat
		}
	}
	if g&(gTime|gDate|gTimestamp) == 0 {
		return g
	}
	v = trimSpace(v)
	if g&gTime != 0 {
		if _, ok := parseTime(v, arrow.Microsecond); !ok {
			g &^= gTime
		}
	}
	if g&(gDate|gTimestamp) != 0 {
		forms, used := dateForms(v)
		if forms != 0 {
			forms |= sepOf(v)
		}
		switch {
		case used == len(v):
			g &^= gTimestamp // as DuckDB: a date among timestamps makes text
			g &= forms | ^gDate
		case forms != 0:
			g &^= gDate
			if _, allowed, _, ok := timeOfDay(v[used:]); ok {
				g &= (forms&(allowed|seps))<<tsShift | ^gTimestamp
			} else {
				g &^= gTimestamp
			}
		default:
			g &^= gDate | gTimestamp
		}
	}
	return g
}

// csvType is the arrow type of a column with guess g; seen is whether any
// non-null value was. A column of nulls only is of the null type until
// Settle widens it with other files' (a string column if none says more).
func (g guess) csvType(seen bool) arrow.DataType {
	switch {
	case !seen:
		return arrow.Null
	case g&gBool != 0:
		return arrow.FixedWidthTypes.Boolean
	case g&gInt != 0:
		return arrow.PrimitiveTypes.Int64
	case g&gFloat != 0:
		return arrow.PrimitiveTypes.Float64
	case g&gTime != 0:
		return arrow.FixedWidthTypes.Time64us
	case isDate(g):
		return arrow.FixedWidthTypes.Date32
	case isDate(g >> tsShift):
		return &arrow.TimestampType{Unit: arrow.Microsecond}
	}
	return arrow.BinaryTypes.String
}

// dateForm and tsForm are the orders a column with guess g reads dates and
// timestamps' dates in: those its sample fits, ISO 8601's where it says
// nothing (no value, or not a date).
func (g guess) dateForm() guess {
	if f := bestForm(g & gDate); f != 0 {
		return f
	}
	return formYMD4
}

func (g guess) tsForm() guess {
	if f := bestForm((g & gTimestamp) >> tsShift); f != 0 {
		return f
	}
	return formYMD4
}

// parseBool reads true, false, t, f, yes and no in any case, as DuckDB
// does; where not strict (a value read into a boolean column) also y, n, 1
// and 0.
func parseBool(v []byte, strict bool) (bool, bool) {
	switch len(v) {
	case 1:
		switch c := v[0] | 0x20; { // ASCII lower case
		case c == 't':
			return true, true
		case c == 'f':
			return false, true
		case !strict && (c == 'y' || v[0] == '1'):
			return true, true
		case !strict && (c == 'n' || v[0] == '0'):
			return false, true
		}
	case 2:
		return false, bytes.EqualFold(v, []byte("no"))
	case 3:
		return true, bytes.EqualFold(v, []byte("yes"))
	case 4:
		return true, bytes.EqualFold(v, []byte("true"))
	case 5:
		return false, bytes.EqualFold(v, []byte("false"))
	}
	return false, false
}

// isSpace is DuckDB's space: blank, tab, line ends, vertical tab, form
// feed.
func isSpace(c byte) bool { return c == ' ' || (c >= '\t' && c <= '\r') }

// trimSpace drops the spaces around v.
func trimSpace(v []byte) []byte {
	for len(v) > 0 && isSpace(v[0]) {
		v = v[1:]
	}
	for len(v) > 0 && isSpace(v[len(v)-1]) {
		v = v[:len(v)-1]
	}
	return v
}

// parseInt reads an integer as DuckDB casts text to BIGINT: spaces around
// it, a '-', decimal digits, or 0x and hex digits, or 0b and binary
// digits. Strict (type detection) it refuses a '+' and a leading zero
// ("00012" is text, as a code or a postal number is); not strict (a value
// read into an integer column) it takes both.
func parseInt(v []byte, strict bool) (int64, bool) {
	v = trimSpace(v)
	if len(v) == 0 {
		return 0, false
	}
	if len(v) > 2 && v[0] == '0' && (v[1]|0x20 == 'x' || v[1]|0x20 == 'b') {
		base := 16
		if v[1]|0x20 == 'b' {
			base = 2
		}
		for _, c := range v[2:] {
			if c == '_' || c == '+' || c == '-' {
				return 0, false
			}
		}
		u, err := strconv.ParseUint(str(v[2:]), base, 63)
		return int64(u), err == nil
	}
	digits := v
	if v[0] == '-' || (v[0] == '+' && !strict) {
		digits = v[1:]
	}
	if strict && v[0] != '-' && len(digits) > 1 && digits[0] == '0' {
		return 0, false
	}
	if len(digits) == 0 || digits[0] < '0' || digits[0] > '9' {
		return 0, false
	}
	i, err := strconv.ParseInt(str(v), 10, 64)
	return i, err == nil
}

// parseFloatAs reads a float as DuckDB casts text to DOUBLE: decimal and
// exponent forms, inf and nan, after spaces; not hex floats or
// underscores. Strict (type detection) it refuses a '+', a leading zero
// before a digit and spaces after; not strict it takes them.
func parseFloatAs(v []byte, strict bool) (float64, bool) {
	for len(v) > 0 && isSpace(v[0]) {
		v = v[1:]
	}
	if strict {
		if len(v) > 0 && v[0] == '+' || len(v) > 1 && v[0] == '0' && v[1] >= '0' && v[1] <= '9' {
			return 0, false
		}
	} else {
		v = trimSpace(v)
	}
	return parseFloat(v)
}

// parseFloat accepts decimal and exponent forms, inf and nan, not hex
// floats or underscores, which no CSV writer means as numbers.
func parseFloat(v []byte) (float64, bool) {
	for _, c := range v {
		if c == '_' || c == 'x' || c == 'X' || c == 'p' || c == 'P' {
			return 0, false
		}
	}
	f, err := strconv.ParseFloat(str(v), 64)
	if err != nil {
		return 0, false
	}
	return f, true
}

// column turns one CSV field a record into a builder's value. parse checks
// a field and holds its value; commit appends what parse held, so that a
// record whose later field fails leaves no value behind.
type column struct {
	field int // the field's index in the file's records
	typ   arrow.DataType
	b     array.Builder
	nulls [][]byte
	bits  int // of an integer type
	// replace is Options.ReplaceInvalidUTF8, for string columns.
	replace bool
	// dateForm and tsForm are the orders of a date's fields the file's
	// sample chose, for date and timestamp columns.
	dateForm, tsForm guess
	// inferred says the type came from the samples, not Options.Schema: a
	// value that does not fit says how to read the column otherwise.
	inferred bool

	null bool
	i    int64
	u    uint64
	f    float64
	s    []byte
}

// supported reports whether the CSV reader can parse values of t.
func supported(t arrow.DataType) bool {
	switch t.ID() {
	case arrow.BOOL, arrow.INT8, arrow.INT16, arrow.INT32, arrow.INT64,
		arrow.UINT8, arrow.UINT16, arrow.UINT32, arrow.UINT64,
		arrow.FLOAT32, arrow.FLOAT64, arrow.STRING, arrow.LARGE_STRING,
		arrow.BINARY, arrow.LARGE_BINARY, arrow.DATE32, arrow.TIMESTAMP, arrow.TIME64:
		return true
	}
	return false
}

func newColumn(mem memory.Allocator, field int, typ arrow.DataType, nulls [][]byte) *column {
	c := &column{field: field, typ: typ, b: array.NewBuilder(mem, typ), nulls: nulls, dateForm: formYMD4, tsForm: formYMD4}
	if fw, ok := typ.(arrow.FixedWidthDataType); ok {
		c.bits = fw.BitWidth()
	}
	return c
}

func (c *column) isNull(v []byte, quoted bool) bool { return isNullValue(v, quoted, c.nulls) }

// isNullValue reports whether a CSV field reads as null: an unquoted value
// that is one of nulls (Options.NullStrings).
func isNullValue(v []byte, quoted bool, nulls [][]byte) bool {
	if quoted {
		return false
	}
	for _, n := range nulls {
		if bytes.Equal(v, n) {
			return true
		}
	}
	return false
}

// parse checks v against the column's type and holds its value.
func (c *column) parse(v []byte, quoted bool) error {
	c.null = c.isNull(v, quoted)
	if c.null {
		return nil
	}
	var ok bool
	switch c.typ.ID() {
	case arrow.BOOL:
		var b bool
		b, ok = parseBool(v, false)
		c.i = 0
		if b {
			c.i = 1
		}
	case arrow.INT8, arrow.INT16, arrow.INT32, arrow.INT64:
		c.i, ok = parseInt(v, false)
		ok = ok && (c.bits == 64 || (c.i >= -1<<(c.bits-1) && c.i < 1<<(c.bits-1)))
	case arrow.UINT8, arrow.UINT16, arrow.UINT32, arrow.UINT64:
		var err error
		c.u, err = strconv.ParseUint(str(trimSpace(v)), 10, c.bits)
		ok = err == nil
	case arrow.FLOAT32, arrow.FLOAT64:
		c.f, ok = parseFloatAs(v, false)
		if ok && c.typ.ID() == arrow.FLOAT32 && !math.IsInf(c.f, 0) && math.Abs(c.f) > math.MaxFloat32 {
			ok = false
		}
	case arrow.STRING, arrow.LARGE_STRING:
		c.s, ok = v, utf8.Valid(v)
		if !ok && c.replace {
			c.s, ok = []byte(strings.ToValidUTF8(string(v), "\uFFFD")), true
		}
		if !ok {
			return fmt.Errorf("%q is not valid UTF-8 (text.Options.ReplaceInvalidUTF8, --invalid-utf8 replace, reads it with U+FFFD)", clip(v))
		}
	case arrow.BINARY, arrow.LARGE_BINARY:
		c.s, ok = v, true
	case arrow.DATE32:
		var d int32
		d, ok = parseDate(trimSpace(v), c.dateForm)
		c.i = int64(d)
	case arrow.TIMESTAMP:
		c.i, ok = parseTimestamp(trimSpace(v), c.tsForm, c.dateForm, c.typ.(*arrow.TimestampType).Unit)
	case arrow.TIME64:
		c.i, ok = parseTime(trimSpace(v), c.typ.(*arrow.Time64Type).Unit)
	default:
		return fmt.Errorf("type %s is not supported in text files", c.typ)
	}
	if !ok && c.inferred {
		return fmt.Errorf("%q is not a valid %s (a type inferred from samples of the files: text.Options.Schema gives the column's type, string to read it as text)", clip(v), c.typ)
	}
	if !ok {
		return fmt.Errorf("%q is not a valid %s", clip(v), c.typ)
	}
	return nil
}

// commit appends the value parse held.
func (c *column) commit() {
	if c.null {
		c.b.AppendNull()
		return
	}
	switch b := c.b.(type) {
	case *array.BooleanBuilder:
		b.Append(c.i == 1)
	case *array.Int8Builder:
		b.Append(int8(c.i))
	case *array.Int16Builder:
		b.Append(int16(c.i))
	case *array.Int32Builder:
		b.Append(int32(c.i))
	case *array.Int64Builder:
		b.Append(c.i)
	case *array.Uint8Builder:
		b.Append(uint8(c.u))
	case *array.Uint16Builder:
		b.Append(uint16(c.u))
	case *array.Uint32Builder:
		b.Append(uint32(c.u))
	case *array.Uint64Builder:
		b.Append(c.u)
	case *array.Float32Builder:
		b.Append(float32(c.f))
	case *array.Float64Builder:
		b.Append(c.f)
	case *array.StringBuilder:
		b.BinaryBuilder.Append(c.s)
	case *array.LargeStringBuilder:
		b.BinaryBuilder.Append(c.s)
	case *array.BinaryBuilder:
		b.Append(c.s)
	case *array.Date32Builder:
		b.Append(arrow.Date32(c.i))
	case *array.TimestampBuilder:
		b.Append(arrow.Timestamp(c.i))
	case *array.Time64Builder:
		b.Append(arrow.Time64(c.i))
	}
}

// clip shortens a value for an error message.
func clip(v []byte) string {
	if len(v) > 64 {
		return string(v[:61]) + "..."
	}
	return string(v)
}

// validUTF8 returns a JSON record whose strings and keys are valid UTF-8:
// rec itself, or with each run of invalid bytes replaced by one U+FFFD if
// replace; else an error saying where the first invalid byte is. The
// whole record is checked at once: outside strings such bytes are a syntax
// error in any case, and the check is cheap next to decoding.
func validUTF8(rec []byte, replace bool) ([]byte, error) {
	if utf8.Valid(rec) {
		return rec, nil
	}
	if replace {
		return []byte(strings.ToValidUTF8(string(rec), "\uFFFD")), nil
	}
	i := 0
	for i < len(rec) {
		r, n := utf8.DecodeRune(rec[i:])
		if r == utf8.RuneError && n <= 1 {
			break
		}
		i += n
	}
	lo := max(0, i-16)
	return nil, fmt.Errorf("byte %d of the record is not valid UTF-8 (%q) (text.Options.ReplaceInvalidUTF8, --invalid-utf8 replace, reads it with U+FFFD)", i, clip(rec[lo:min(len(rec), i+16)]))
}
