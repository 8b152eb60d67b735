package text

import (
	"errors"
	"fmt"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// flatJSON decodes JSON objects whose selected columns are all scalars
// straight into column builders, the way the CSV reader does: arrow-go's
// JSON decoder goes through a token stream and was the bottleneck of JSON
// Lines reads (about 0.7M rows per CPU second against 3M for CSV of the
// same rows, bench text scenario). Nested columns use arrow-go's decoder.
// Its rules are arrow-go's: a missing key is null, an unknown key is
// skipped, a key given twice and a value of the wrong JSON type are errors.
type flatJSON struct {
	cols    []*column
	index   map[string]int
	seen    []uint32
	gen     uint32
	scratch []byte
}

// newFlatJSON returns a decoder for schema, or false if a column is not a
// scalar it handles.
func newFlatJSON(mem memory.Allocator, schema *arrow.Schema) (*flatJSON, bool) {
	fj := &flatJSON{index: map[string]int{}}
	for _, f := range schema.Fields() {
		if !supported(f.Type) {
			return nil, false
		}
	}
	for i, f := range schema.Fields() {
		fj.cols = append(fj.cols, newColumn(mem, i, f.Type, nil))
		fj.index[f.Name] = i
	}
	fj.seen = make([]uint32, len(fj.cols))
	return fj, true
}

var errNotObject = errors.New("the record is not a JSON object")

func skipWS(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r' || b[i] == '\n') {
		i++
	}
	return i
}

// parse reads one object into the columns' held values; commit appends
// them. Nothing but white space may follow the object.
func (fj *flatJSON) parse(rec []byte) error {
	fj.gen++
	if fj.gen == 0 { // wrapped: clear the marks
		clear(fj.seen)
		fj.gen = 1
	}
	fj.scratch = fj.scratch[:0]
	i := skipWS(rec, 0)
	if i >= len(rec) || rec[i] != '{' {
		return errNotObject
	}
	i = skipWS(rec, i+1)
	if i < len(rec) && rec[i] == '}' {
		i++
	} else {
		for {
			if i >= len(rec) || rec[i] != '"' {
				return fmt.Errorf("byte %d: a key must be a string", i)
			}
			key, next, err := fj.str(rec, i)
			if err != nil {
				return err
			}
			i = skipWS(rec, next)
			if i >= len(rec) || rec[i] != ':' {
				return fmt.Errorf("byte %d: ':' expected after a key", i)
			}
			i = skipWS(rec, i+1)
			ci, ok := fj.index[string(key)]
			if !ok {
				if i, err = skipValue(rec, i); err != nil {
					return err
				}
			} else {
				if fj.seen[ci] == fj.gen {
					return fmt.Errorf("key %q given twice", key)
				}
				fj.seen[ci] = fj.gen
				if i, err = fj.value(rec, i, fj.cols[ci]); err != nil {
					return fmt.Errorf("key %q: %w", key, err)
				}
			}
			i = skipWS(rec, i)
			if i >= len(rec) {
				return errors.New("the object is not closed")
			}
			if rec[i] == ',' {
				i = skipWS(rec, i+1)
				continue
			}
			if rec[i] == '}' {
				i++
				break
			}
			return fmt.Errorf("byte %d: ',' or '}' expected", i)
		}
	}
	if !blank(rec[i:]) {
		return fmt.Errorf("byte %d: data after the object", i)
	}
	for ci, c := range fj.cols {
		if fj.seen[ci] != fj.gen {
			c.null = true
		}
	}
	return nil
}

func (fj *flatJSON) commit() {
	for _, c := range fj.cols {
		c.commit()
	}
}

// value reads the value at i into c.
func (fj *flatJSON) value(b []byte, i int, c *column) (int, error) {
	if i >= len(b) {
		return i, errors.New("value expected")
	}
	id := c.typ.ID()
	isNum := arrow.IsInteger(id) || arrow.IsFloating(id)
	switch ch := b[i]; {
	case ch == '"':
		s, next, err := fj.str(b, i)
		if err != nil {
			return next, err
		}
		if isNum || id == arrow.BOOL {
			return next, fmt.Errorf("a string where a %s is expected", c.typ)
		}
		return next, c.parse(s, true)
	case ch == 'n':
		if len(b)-i < 4 || string(b[i:i+4]) != "null" {
			return i, fmt.Errorf("byte %d: invalid literal", i)
		}
		c.null = true
		return i + 4, nil
	case ch == 't' || ch == 'f':
		lit := "true"
		if ch == 'f' {
			lit = "false"
		}
		if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
			return i, fmt.Errorf("byte %d: invalid literal", i)
		}
		if id != arrow.BOOL {
			return i, fmt.Errorf("a boolean where a %s is expected", c.typ)
		}
		return i + len(lit), c.parse(b[i:i+len(lit)], false)
	case ch == '-' || (ch >= '0' && ch <= '9'):
		j := i + 1
		for j < len(b) && (b[j] >= '0' && b[j] <= '9' || b[j] == '.' || b[j] == 'e' || b[j] == 'E' || b[j] == '+' || b[j] == '-') {
			j++
		}
		if !isNum {
			return j, fmt.Errorf("a number where a %s is expected", c.typ)
		}
		num := b[i:j]
		if arrow.IsInteger(id) {
			// A JSON number is an integer only without fraction or exponent.
			if _, err := strconv.ParseInt(str(num), 10, 64); err != nil {
				if _, uerr := strconv.ParseUint(str(num), 10, 64); uerr != nil {
					return j, fmt.Errorf("%q is not a valid %s", clip(num), c.typ)
				}
			}
		} else if _, err := strconv.ParseFloat(str(num), 64); err != nil {
			return j, fmt.Errorf("%q is not a valid JSON number", clip(num))
		}
		return j, c.parse(num, false)
	case ch == '{' || ch == '[':
		return i, fmt.Errorf("an object or array where a %s is expected", c.typ)
	}
	return i, fmt.Errorf("byte %d: unexpected %q", i, b[i])
}

// str reads the string at b[i] (a quote) and returns its content, in b
// where it has no escapes, else unescaped in the scratch buffer.
func (fj *flatJSON) str(b []byte, i int) ([]byte, int, error) {
	j := i + 1
	for j < len(b) {
		switch c := b[j]; {
		case c == '"':
			return b[i+1 : j], j + 1, nil
		case c == '\\':
			return fj.unescape(b, i+1, j)
		case c < 0x20:
			return nil, j, fmt.Errorf("byte %d: control character in a string", j)
		}
		j++
	}
	return nil, j, errors.New("a string is not closed")
}

func (fj *flatJSON) unescape(b []byte, start, j int) ([]byte, int, error) {
	from := len(fj.scratch)
	fj.scratch = append(fj.scratch, b[start:j]...)
	for j < len(b) {
		c := b[j]
		switch {
		case c == '"':
			out := fj.scratch[from:len(fj.scratch):len(fj.scratch)]
			return out, j + 1, nil
		case c < 0x20:
			return nil, j, fmt.Errorf("byte %d: control character in a string", j)
		case c != '\\':
			fj.scratch = append(fj.scratch, c)
			j++
			continue
		}
		if j+1 >= len(b) {
			break
		}
		switch e := b[j+1]; e {
		case '"', '\\', '/':
			fj.scratch = append(fj.scratch, e)
		case 'b':
			fj.scratch = append(fj.scratch, '\b')
		case 'f':
			fj.scratch = append(fj.scratch, '\f')
		case 'n':
			fj.scratch = append(fj.scratch, '\n')
		case 'r':
			fj.scratch = append(fj.scratch, '\r')
		case 't':
			fj.scratch = append(fj.scratch, '\t')
		case 'u':
			r, n, ok := hexRune(b[j:])
			if !ok {
				return nil, j, fmt.Errorf("byte %d: invalid \\u escape", j)
			}
			fj.scratch = utf8.AppendRune(fj.scratch, r)
			j += n
			continue
		default:
			return nil, j, fmt.Errorf("byte %d: invalid escape", j)
		}
		j += 2
	}
	return nil, j, errors.New("a string is not closed")
}

// hexRune decodes \uXXXX (and a following low surrogate) at b.
func hexRune(b []byte) (rune, int, bool) {
	one := func(b []byte) (rune, bool) {
		if len(b) < 6 || b[0] != '\\' || b[1] != 'u' {
			return 0, false
		}
		v, err := strconv.ParseUint(string(b[2:6]), 16, 16)
		return rune(v), err == nil
	}
	r, ok := one(b)
	if !ok {
		return 0, 0, false
	}
	if utf16.IsSurrogate(r) {
		if r2, ok := one(b[6:]); ok {
			if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
				return d, 12, true
			}
		}
		return utf8.RuneError, 6, true
	}
	return r, 6, true
}

// skipValue skips the JSON value at i, checking its nesting and strings,
// not its scalars' syntax (the value is not read).
func skipValue(b []byte, i int) (int, error) {
	depth := 0
	for i < len(b) {
		switch b[i] {
		case '"':
			i++
			for i < len(b) && b[i] != '"' {
				if b[i] == '\\' {
					i++
				}
				i++
			}
			if i >= len(b) {
				return i, errors.New("a string is not closed")
			}
			i++
		case '{', '[':
			depth++
			i++
		case '}', ']':
			if depth == 0 {
				return i, nil
			}
			depth--
			i++
		case ',':
			if depth == 0 {
				return i, nil
			}
			i++
		default:
			if depth == 0 && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r' || b[i] == '\n') {
				return i, nil
			}
			i++
		}
		if depth == 0 && i > 0 && (b[i-1] == '"' || b[i-1] == '}' || b[i-1] == ']') {
			return i, nil
		}
	}
	if depth > 0 {
		return i, errors.New("a value is not closed")
	}
	return i, nil
}
