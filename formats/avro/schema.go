package avro

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/extensions"
)

// kind is an Avro type.
type kind uint8

const (
	kNull kind = iota
	kBoolean
	kInt
	kLong
	kFloat
	kDouble
	kBytes
	kString
	kRecord
	kEnum
	kArray
	kMap
	kFixed
	kUnion
)

var primitives = map[string]kind{
	"null": kNull, "boolean": kBoolean, "int": kInt, "long": kLong,
	"float": kFloat, "double": kDouble, "bytes": kBytes, "string": kString,
}

// node is one type of a writer's schema, with the Arrow type it reads as.
type node struct {
	kind kind
	// logical is the logical type the node reads as, or "" where the
	// schema names none or one this driver does not know or that is not
	// valid on its type (the Avro specification says to read those as
	// the underlying type).
	logical string
	name    string // a named type's full name
	fields  []field
	// items is an array's elements or a map's values.
	items    *node
	branches []*node
	symbols  []string
	size     int // a fixed's bytes
	// precision and scale of a decimal.
	precision, scale int32
	// utc is false for a timestamp Iceberg marks "adjust-to-utc": false.
	utc bool
	// ids: a field's Iceberg field id where a list's elements or a map's
	// keys and values carry one (element-id, key-id, value-id), else -1.
	elemID, keyID, valueID int
	// null is the branch of a union that is null, -1 if none; value is
	// the other branch of a union of null and one type (a nullable
	// column), else -1.
	null, value int
	// entries is set on an array of key-value records Iceberg writes for
	// a map whose keys are not strings (logicalType "map"): it reads as an
	// Arrow map.
	entries bool
	arrow   arrow.DataType
	// nullable is whether values of this type can be null (a union with
	// a null branch, or null itself).
	nullable bool
}

// field is one field of a record.
type field struct {
	name string
	typ  *node
	// id is the Iceberg field id ("field-id"), or -1.
	id int
}

// fieldIDKey is the Arrow field metadata key Iceberg's column mapping
// reads field ids from (the one Parquet files carry them under).
const fieldIDKey = "PARQUET:field_id"

// maxDepth bounds the nesting of a schema, so that a hostile header
// cannot exhaust the stack.
const maxDepth = 64

// parseSchema parses the writer's schema of a file's header.
func parseSchema(text []byte) (*node, error) {
	dec := json.NewDecoder(bytes.NewReader(text))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("schema: %w", err)
	}
	p := &schemaParser{named: map[string]*node{}, building: map[string]bool{}}
	n, err := p.parse(v, "", 0)
	if err != nil {
		return nil, fmt.Errorf("schema: %w", err)
	}
	return n, nil
}

type schemaParser struct {
	named map[string]*node
	// building holds the named types being parsed: a reference to one of
	// them is a recursive type, which Arrow cannot hold.
	building map[string]bool
}

func (p *schemaParser) parse(v any, ns string, depth int) (*node, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("nested more than %d deep", maxDepth)
	}
	switch t := v.(type) {
	case string:
		return p.byName(t, ns)
	case []any:
		return p.union(t, ns, depth)
	case map[string]any:
		return p.object(t, ns, depth)
	}
	return nil, fmt.Errorf("a type given as %T", v)
}

// named_ is a primitive type by name, or a reference to a named type.
func (p *schemaParser) byName(name, ns string) (*node, error) {
	if k, ok := primitives[name]; ok {
		return finish(&node{kind: k})
	}
	full := name
	if !strings.Contains(name, ".") && ns != "" {
		full = ns + "." + name
	}
	for _, n := range []string{full, name} {
		if p.building[n] {
			return nil, fmt.Errorf("type %q refers to itself: recursive types have no Arrow type", n)
		}
		if nd := p.named[n]; nd != nil {
			return nd, nil
		}
	}
	return nil, fmt.Errorf("unknown type %q", name)
}

func (p *schemaParser) union(bs []any, ns string, depth int) (*node, error) {
	if len(bs) == 0 {
		return nil, errors.New("a union of no types")
	}
	if len(bs) > 127 {
		return nil, fmt.Errorf("a union of %d types (Arrow unions hold at most 127)", len(bs))
	}
	n := &node{kind: kUnion, null: -1, value: -1}
	for _, b := range bs {
		c, err := p.parse(b, ns, depth+1)
		if err != nil {
			return nil, err
		}
		if c.kind == kUnion {
			return nil, errors.New("a union directly inside a union")
		}
		if c.kind == kNull {
			if n.null >= 0 {
				return nil, errors.New("a union with null twice")
			}
			n.null = len(n.branches)
		}
		n.branches = append(n.branches, c)
	}
	if n.null >= 0 && len(n.branches) == 2 {
		n.value = 1 - n.null
	}
	return finish(n)
}

// fullName is a named type's full name and the namespace its own
// children resolve names in.
func fullName(o map[string]any, ns string) (string, string, error) {
	name, _ := o["name"].(string)
	if name == "" {
		return "", "", fmt.Errorf("a %v with no name", o["type"])
	}
	if i := strings.LastIndexByte(name, '.'); i >= 0 {
		return name, name[:i], nil
	}
	if s, ok := o["namespace"].(string); ok {
		ns = s
	}
	if ns == "" {
		return name, "", nil
	}
	return ns + "." + name, ns, nil
}

func (p *schemaParser) object(o map[string]any, ns string, depth int) (*node, error) {
	var n *node
	switch t := o["type"].(type) {
	case string:
		switch t {
		case "record", "error", "enum", "fixed":
			full, inner, err := fullName(o, ns)
			if err != nil {
				return nil, err
			}
			if p.named[full] != nil || p.building[full] {
				return nil, fmt.Errorf("type %q defined twice", full)
			}
			p.building[full] = true
			n, err = p.namedType(t, full, inner, o, depth)
			delete(p.building, full)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", full, err)
			}
			p.named[full] = n
		case "array", "map":
			key := map[string]string{"array": "items", "map": "values"}[t]
			items, err := p.parse(o[key], ns, depth+1)
			if err != nil {
				return nil, fmt.Errorf("%s %s: %w", t, key, err)
			}
			n = &node{kind: kArray, items: items, elemID: intProp(o, "element-id"), keyID: intProp(o, "key-id"), valueID: intProp(o, "value-id")}
			if t == "map" {
				n.kind = kMap
			}
		default:
			// A primitive, possibly with a logical type; or a reference.
			var err error
			if n, err = p.byName(t, ns); err != nil {
				return nil, err
			}
			if _, prim := primitives[t]; prim {
				c := *n
				n = &c
			} else {
				return n, nil // a reference's own attributes do not apply
			}
		}
	case nil:
		return nil, errors.New("a type object with no \"type\"")
	default:
		// {"type": {...}}: the type is the inner one.
		return p.parse(t, ns, depth+1)
	}
	n.logical, _ = o["logicalType"].(string)
	if n.logical == "decimal" {
		n.precision, n.scale = int32(intProp(o, "precision")), int32(max(intProp(o, "scale"), 0))
	}
	n.utc = true
	if u, ok := o["adjust-to-utc"].(bool); ok {
		n.utc = u
	}
	return finish(n)
}

func (p *schemaParser) namedType(t, full, ns string, o map[string]any, depth int) (*node, error) {
	switch t {
	case "enum":
		syms, ok := o["symbols"].([]any)
		if !ok {
			return nil, errors.New("an enum with no symbols")
		}
		n := &node{kind: kEnum, name: full}
		for _, s := range syms {
			str, ok := s.(string)
			if !ok {
				return nil, fmt.Errorf("an enum symbol %v", s)
			}
			n.symbols = append(n.symbols, str)
		}
		return n, nil
	case "fixed":
		size := intProp(o, "size")
		if size < 0 {
			return nil, fmt.Errorf("a fixed of size %v", o["size"])
		}
		return &node{kind: kFixed, name: full, size: size}, nil
	}
	fs, ok := o["fields"].([]any)
	if !ok {
		return nil, errors.New("a record with no fields")
	}
	n := &node{kind: kRecord, name: full}
	seen := map[string]bool{}
	for _, f := range fs {
		fo, ok := f.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("a field %v", f)
		}
		name, _ := fo["name"].(string)
		if name == "" || seen[name] {
			return nil, fmt.Errorf("a field named %q (empty, or twice)", name)
		}
		seen[name] = true
		typ, err := p.parse(fo["type"], ns, depth+1)
		if err != nil {
			return nil, fmt.Errorf("field %q: %w", name, err)
		}
		n.fields = append(n.fields, field{name: name, typ: typ, id: intProp(fo, "field-id")})
	}
	return n, nil
}

// intProp is a whole-number attribute of o, or -1.
func intProp(o map[string]any, key string) int {
	switch v := o[key].(type) {
	case json.Number:
		if i, err := strconv.ParseInt(string(v), 10, 32); err == nil {
			return int(i)
		}
	case string:
		if i, err := strconv.ParseInt(v, 10, 32); err == nil {
			return int(i)
		}
	}
	return -1
}

// finish works out the node's Arrow type, dropping a logical type that is
// unknown or invalid on the node.
func finish(n *node) (*node, error) {
	n.arrow = arrowType(n)
	if n.arrow == nil {
		return nil, fmt.Errorf("%s has no Arrow type", describe(n))
	}
	return n, nil
}

func arrowType(n *node) arrow.DataType {
	switch n.kind {
	case kNull:
		n.nullable = true
		return arrow.Null
	case kBoolean:
		return arrow.FixedWidthTypes.Boolean
	case kInt:
		switch n.logical {
		case "date":
			return arrow.FixedWidthTypes.Date32
		case "time-millis":
			return arrow.FixedWidthTypes.Time32ms
		}
		n.logical = ""
		return arrow.PrimitiveTypes.Int32
	case kLong:
		return longType(n)
	case kFloat:
		return arrow.PrimitiveTypes.Float32
	case kDouble:
		return arrow.PrimitiveTypes.Float64
	case kBytes, kFixed:
		if n.logical == "decimal" {
			if dt := decimalType(n); dt != nil {
				return dt
			}
		}
		if n.kind == kFixed {
			switch {
			case n.logical == "duration" && n.size == 12:
				return arrow.FixedWidthTypes.MonthDayNanoInterval
			case n.logical == "uuid" && n.size == 16:
				return extensions.NewUUIDType() // as Iceberg's tables type it
			}
			n.logical = ""
			return &arrow.FixedSizeBinaryType{ByteWidth: n.size}
		}
		n.logical = ""
		return arrow.BinaryTypes.Binary
	case kString, kEnum:
		if n.logical != "uuid" {
			n.logical = ""
		}
		return arrow.BinaryTypes.String
	case kRecord:
		n.logical = ""
		return arrow.StructOf(arrowFields(n)...)
	case kArray:
		if n.logical == "map" {
			if dt := entriesType(n); dt != nil {
				n.entries = true
				return dt
			}
		}
		n.logical = ""
		return arrow.ListOfField(withID(arrow.Field{Name: "element", Type: n.items.arrow, Nullable: n.items.nullable}, n.elemID))
	case kMap:
		n.logical = ""
		mt := arrow.MapOfWithMetadata(arrow.BinaryTypes.String, idMeta(n.keyID), n.items.arrow, idMeta(n.valueID))
		mt.SetItemNullable(n.items.nullable)
		return mt
	case kUnion:
		n.logical = ""
		return unionType(n)
	}
	return nil
}

func longType(n *node) arrow.DataType {
	unit := map[string]arrow.TimeUnit{
		"timestamp-millis": arrow.Millisecond, "timestamp-micros": arrow.Microsecond, "timestamp-nanos": arrow.Nanosecond,
		"local-timestamp-millis": arrow.Millisecond, "local-timestamp-micros": arrow.Microsecond, "local-timestamp-nanos": arrow.Nanosecond,
	}
	if u, ok := unit[n.logical]; ok {
		if strings.HasPrefix(n.logical, "local-") || !n.utc {
			return &arrow.TimestampType{Unit: u}
		}
		return &arrow.TimestampType{Unit: u, TimeZone: "UTC"}
	}
	if n.logical == "time-micros" {
		return arrow.FixedWidthTypes.Time64us
	}
	n.logical = ""
	return arrow.PrimitiveTypes.Int64
}

// decimalType is a valid decimal's Arrow type, or nil.
func decimalType(n *node) arrow.DataType {
	p, s := n.precision, n.scale
	if p <= 0 || s > p {
		return nil
	}
	if n.kind == kFixed && n.size < 1 {
		return nil
	}
	switch {
	case p <= 38:
		return &arrow.Decimal128Type{Precision: p, Scale: s}
	case p <= 76:
		return &arrow.Decimal256Type{Precision: p, Scale: s}
	}
	return nil
}

// entriesType is the Arrow map an Iceberg array of key-value records
// reads as, or nil where the array is not one.
func entriesType(n *node) arrow.DataType {
	r := n.items
	if r.kind != kRecord || len(r.fields) != 2 || r.fields[0].name != "key" || r.fields[1].name != "value" || r.fields[0].typ.nullable {
		return nil
	}
	k, v := r.fields[0], r.fields[1]
	mt := arrow.MapOfWithMetadata(k.typ.arrow, idMeta(k.id), v.typ.arrow, idMeta(v.id))
	mt.SetItemNullable(v.typ.nullable)
	return mt
}

func unionType(n *node) arrow.DataType {
	if n.null >= 0 {
		n.nullable = true
	}
	switch {
	case len(n.branches) == 1:
		b := n.branches[0]
		n.nullable = b.nullable
		return b.arrow
	case n.value >= 0:
		return n.branches[n.value].arrow
	}
	fields := make([]arrow.Field, len(n.branches))
	codes := make([]arrow.UnionTypeCode, len(n.branches))
	for i, b := range n.branches {
		fields[i] = arrow.Field{Name: branchName(b), Type: b.arrow, Nullable: b.nullable}
		codes[i] = arrow.UnionTypeCode(i)
	}
	return arrow.DenseUnionOf(fields, codes)
}

// branchName names a union's branch as Avro's JSON encoding does: a named
// type by its full name, any other by its type.
func branchName(n *node) string {
	if n.name != "" {
		return n.name
	}
	for name, k := range primitives {
		if k == n.kind {
			return name
		}
	}
	return map[kind]string{kArray: "array", kMap: "map"}[n.kind]
}

func arrowFields(n *node) []arrow.Field {
	out := make([]arrow.Field, len(n.fields))
	for i, f := range n.fields {
		out[i] = withID(arrow.Field{Name: f.name, Type: f.typ.arrow, Nullable: f.typ.nullable}, f.id)
	}
	return out
}

func idMeta(id int) arrow.Metadata {
	if id < 0 {
		return arrow.Metadata{}
	}
	return arrow.NewMetadata([]string{fieldIDKey}, []string{strconv.Itoa(id)})
}

func withID(f arrow.Field, id int) arrow.Field {
	if id >= 0 {
		f.Metadata = idMeta(id)
	}
	return f
}

// describe names a node for errors.
func describe(n *node) string {
	if n.name != "" {
		return n.name
	}
	s := branchName(n)
	if n.kind == kUnion {
		s = "union"
	}
	if n.logical != "" {
		s += " (" + n.logical + ")"
	}
	return s
}

// columns are the file's top-level columns: a record's fields, or one
// column "value" for a file of another type.
func columns(root *node) []field {
	if root.kind == kRecord {
		return root.fields
	}
	return []field{{name: "value", typ: root, id: -1}}
}
