package text

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
)

// jkind is what inference knows of a JSON value's type.
type jkind uint8

const (
	jNull jkind = iota
	jBool
	jInt
	jFloat
	jString
	jList
	jStruct
	jMixed // values of types no arrow type holds together
)

// jtype is an inferred JSON type: a tree for lists and objects, whose
// fields keep the order keys were first seen in.
type jtype struct {
	kind   jkind
	elem   *jtype
	names  []string
	fields map[string]*jtype
	// mixed names the kinds that clashed, for the error.
	mixed string
}

func (k jkind) String() string {
	return [...]string{"null", "boolean", "integer", "number", "string", "array", "object", "mixed"}[k]
}

// merge widens t to hold o's values too.
func (t *jtype) merge(o *jtype) {
	switch {
	case o.kind == jNull || t.kind == jMixed:
		return
	case t.kind == jNull:
		*t = *o.clone()
	case t.kind == o.kind:
		switch t.kind {
		case jList:
			t.elem.merge(o.elem)
		case jStruct:
			for _, n := range o.names {
				if f, ok := t.fields[n]; ok {
					f.merge(o.fields[n])
				} else {
					t.names = append(t.names, n)
					t.fields[n] = o.fields[n].clone()
				}
			}
		}
	case (t.kind == jInt && o.kind == jFloat) || (t.kind == jFloat && o.kind == jInt):
		t.kind = jFloat
	case o.kind == jMixed:
		*t = *o.clone()
	default:
		t.mixed = t.kind.String() + " and " + o.kind.String()
		t.kind, t.elem, t.names, t.fields = jMixed, nil, nil, nil
	}
}

func (t *jtype) clone() *jtype {
	c := *t
	if t.elem != nil {
		c.elem = t.elem.clone()
	}
	if t.fields != nil {
		c.names = append([]string(nil), t.names...)
		c.fields = make(map[string]*jtype, len(t.fields))
		for n, f := range t.fields {
			c.fields[n] = f.clone()
		}
	}
	return &c
}

// arrowType is the arrow type of t. A mixed type is an error naming the
// column path, unless toString makes it a string.
func (t *jtype) arrowType(name string, toString bool) (arrow.DataType, error) {
	switch t.kind {
	case jNull:
		if !strings.ContainsAny(name, ".[") {
			return arrow.Null, nil // a top-level column: Settle decides
		}
		return arrow.BinaryTypes.String, nil
	case jString:
		return arrow.BinaryTypes.String, nil
	case jBool:
		return arrow.FixedWidthTypes.Boolean, nil
	case jInt:
		return arrow.PrimitiveTypes.Int64, nil
	case jFloat:
		return arrow.PrimitiveTypes.Float64, nil
	case jList:
		e, err := t.elem.arrowType(name+"[]", toString)
		if err != nil {
			return nil, err
		}
		return arrow.ListOf(e), nil
	case jStruct:
		fields := make([]arrow.Field, len(t.names))
		for i, n := range t.names {
			ft, err := t.fields[n].arrowType(name+"."+n, toString)
			if err != nil {
				return nil, err
			}
			fields[i] = arrow.Field{Name: n, Type: ft, Nullable: true}
		}
		return arrow.StructOf(fields...), nil
	}
	if toString {
		return arrow.BinaryTypes.String, nil
	}
	return nil, fmt.Errorf("column %q holds %s values in the sample: give Options.Schema, or set WidenToString to read it as text", name, t.mixed)
}

// inferJSON reads one JSON value from dec and returns its type.
func inferJSON(dec *json.Decoder) (*jtype, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch v := tok.(type) {
	case nil:
		return &jtype{kind: jNull}, nil
	case bool:
		return &jtype{kind: jBool}, nil
	case json.Number:
		if strings.ContainsAny(string(v), ".eE") {
			return &jtype{kind: jFloat}, nil
		}
		if _, err := v.Int64(); err != nil {
			return &jtype{kind: jFloat}, nil
		}
		return &jtype{kind: jInt}, nil
	case string:
		return &jtype{kind: jString}, nil
	case json.Delim:
		switch v {
		case '[':
			t := &jtype{kind: jList, elem: &jtype{kind: jNull}}
			for dec.More() {
				e, err := inferJSON(dec)
				if err != nil {
					return nil, err
				}
				t.elem.merge(e)
			}
			_, err := dec.Token()
			return t, err
		case '{':
			t := &jtype{kind: jStruct, fields: map[string]*jtype{}}
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					return nil, err
				}
				name, _ := k.(string)
				f, err := inferJSON(dec)
				if err != nil {
					return nil, err
				}
				if old, ok := t.fields[name]; ok {
					old.merge(f) // a key given twice: arrow-go keeps the last
					continue
				}
				t.names = append(t.names, name)
				t.fields[name] = f
			}
			_, err := dec.Token()
			return t, err
		}
	}
	return nil, fmt.Errorf("unexpected JSON token %v", tok)
}

// inferRecord infers the type of one record, which must be an object.
func inferRecord(rec []byte) (*jtype, error) {
	dec := json.NewDecoder(bytes.NewReader(rec))
	dec.UseNumber()
	t, err := inferJSON(dec)
	if err != nil {
		return nil, err
	}
	if t.kind != jStruct {
		return nil, fmt.Errorf("a record is a JSON %s, not an object", t.kind)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("more than one JSON value on a line")
	}
	return t, nil
}

// bom is the UTF-8 byte order mark some writers put first.
var bom = []byte("\ufeff")

// jsonRecords walks the records of a .json file: the elements of one
// top-level array, or objects one after another. It calls fn with each
// record's bytes and its offset; fn returning false stops the walk.
func jsonRecords(data []byte, fn func(rec []byte, off int64) (bool, error)) error {
	data = bytes.TrimPrefix(data, bom)
	dec := json.NewDecoder(bytes.NewReader(data))
	trimmed := bytes.TrimLeft(data, " \t\r\n")
	inArray := len(trimmed) > 0 && trimmed[0] == '['
	if inArray {
		if _, err := dec.Token(); err != nil {
			return err
		}
	}
	for dec.More() {
		off := dec.InputOffset()
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return &syntaxError{off, err.Error()}
		}
		more, err := fn(raw, off)
		if err != nil || !more {
			return err
		}
	}
	if inArray {
		if tok, err := dec.Token(); err != nil || tok != json.Delim(']') {
			return &syntaxError{dec.InputOffset(), "the top-level array is not closed"}
		}
	}
	if _, err := dec.Token(); err != io.EOF {
		return &syntaxError{dec.InputOffset(), "data after the top-level value"}
	}
	return nil
}
