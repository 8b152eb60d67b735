package typed

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/sluicedata/sluice/internal/govalue"
)

// ErrOutputMapping is wrapped by the errors of Structs, Rows and Matrices
// when the source's schema does not fit the requested output: a missing or
// ambiguous column, or a column type that does not convert to the field's
// Go type. These errors come before the first batch is read.
//
// Its text, and the "stream: " that starts the outputs' errors, are as they
// were when the outputs lived in package stream: callers match on them.
var ErrOutputMapping = errors.New("stream: the schema does not fit the output")

// ErrNullValue is wrapped when a null reaches an output that cannot hold
// it: a non-pointer struct field (other than []byte) or a matrix cell.
var ErrNullValue = errors.New("stream: null value where a value is required")

// Source is what the outputs read: the schema of every batch, and the
// batches of the rest of the current epoch in order, each valid at least
// until the loop body returns (the outputs copy what they keep).
// *stream.Dataset and *stream.Mixed are sources.
type Source interface {
	Schema() *arrow.Schema
	Batches(ctx context.Context) iter.Seq2[arrow.RecordBatch, error]
}

// Mapper is a Source that runs a function over its batches on goroutines of
// its own and yields the results in the order of Batches, as stream.Map
// does. The outputs decode through MapAny where a source has it, so that
// decoding runs in parallel and counts as the source's transform time;
// *stream.Dataset is a Mapper (on stream.Options.Limits.TransformConcurrency
// goroutines). From any other Source the outputs decode each batch as it
// arrives, on the loop's goroutine.
type Mapper interface {
	Source
	MapAny(ctx context.Context, fn func(context.Context, arrow.RecordBatch) (any, error)) iter.Seq2[any, error]
}

// decodeAll streams the batches of src through decode, in their order.
func decodeAll[T any](ctx context.Context, src Source, decode func(arrow.RecordBatch) (T, error)) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		var zero T
		if m, ok := src.(Mapper); ok {
			for v, err := range m.MapAny(ctx, func(_ context.Context, b arrow.RecordBatch) (any, error) {
				out, err := decode(b)
				return out, err
			}) {
				if err != nil {
					yield(zero, err)
					return
				}
				if !yield(v.(T), nil) {
					return
				}
			}
			return
		}
		i := 0
		for b, err := range src.Batches(ctx) {
			if err != nil {
				yield(zero, err)
				return
			}
			out, err := decode(b)
			if err != nil {
				// As stream.Map names the batch a transform failed on.
				yield(zero, fmt.Errorf("%w (batch %d of the loop)", err, i))
				return
			}
			if !yield(out, nil) {
				return
			}
			i++
		}
	}
}

// Structs streams the rest of src's current epoch as batches of T, in
// exactly the order of src.Batches: from a Mapper (a *stream.Dataset),
// batches decode in parallel on its transform goroutines and arrive in
// order. T must be a struct type. Each batch is one new []T that the caller
// owns. As with Batches, breaking out of the loop keeps the position, and
// the end of the epoch moves the source to the next one.
//
// Fields map to columns by their `sluice` tag:
//
//	type Row struct {
//		ID    int64   `sluice:"id"` // the column "id"; a missing column is an error
//		Label int64                 // no tag: the column "Label", else the one column equal to it ignoring case ("label")
//		X     float64 `sluice:"x"`
//		Note  *string `sluice:"note"` // a pointer field receives nulls as nil
//		Debug string  `sluice:"-"`    // not decoded
//	}
//	for rows, err := range typed.Structs[Row](ctx, ds) {
//		if err != nil {
//			return err
//		}
//		for _, r := range rows { ... }
//	}
//
// Every exported field must map to exactly one column, unless tagged
// `sluice:"-"`: a field that silently stays zero is a bug in a training
// set. Unexported fields are ignored (tagging one is an error). Fields of
// embedded structs are promoted as in encoding/json; embedding a struct by
// pointer is not supported. Two fields mapping to one column is an error.
// Columns without a field are not decoded (select columns with
// stream.Options.Columns so they are not read either).
//
// A conversion is allowed only when it is exact for every value of the
// column's Arrow type, so it is checked once, against src.Schema(), before
// anything is read:
//
//	Arrow type                         Go field kind
//	int8, int16, int32, int64          int kinds of at least as many bits;
//	                                   float32 from int8 and int16, float64 from int8..int32
//	uint8, uint16, uint32, uint64      uint kinds of at least as many bits, int kinds of more bits;
//	                                   float32 from uint8 and uint16, float64 from uint8..uint32
//	float16                            float32, float64
//	float32                            float32, float64
//	float64                            float64 (not float32: it rounds; Matrices converts to float32)
//	bool                               bool
//	string, large_string, string_view,
//	binary, large_binary, binary_view,
//	fixed_size_binary                  string, []byte
//	timestamp (any unit)               time.Time in the column's time zone, UTC when it has none
//	date32, date64                     time.Time at UTC
//
// Named types of those kinds work (type Label int16, time.Duration). A
// field may also be a pointer to any of them (*int64, *time.Time): a null
// is nil, and the values of one column of one batch share one allocation.
// A null into any other field is an error wrapping ErrNullValue that names
// the column, its row in the batch and the field, except for a []byte
// field, which receives nil. Strings and byte slices of one column of one
// batch are cut from one copy of the column's bytes: keeping a single value
// keeps that copy alive (strings.Clone or bytes.Clone the few values you
// keep for long). Byte slices have their capacity capped, so appending to
// one never writes into the next.
//
// Decoding goes column by column: the conversion is chosen once per column
// and batch, then one loop sets that field in every row through reflect.
//
// A mapping error wraps ErrOutputMapping and names the column, its Arrow
// type, the field and its Go type. The first error ends the iteration.
func Structs[T any](ctx context.Context, src Source) iter.Seq2[[]T, error] {
	return func(yield func([]T, error) bool) {
		p, err := newStructPlan(src.Schema(), reflect.TypeFor[T]())
		if err != nil {
			yield(nil, err)
			return
		}
		decodeAll(ctx, src, func(b arrow.RecordBatch) ([]T, error) {
			return decodeStructs[T](p, b)
		})(yield)
	}
}

// Rows streams the rest of src's current epoch as batches of rows, each a
// map from column name to value, in exactly the order of src.Batches (in
// parallel from a Mapper, like Structs). Every map holds every column of
// src.Schema(). Values
// are Go values the caller owns, copied out of Arrow memory:
//
//	Arrow type                                         Go value
//	int8, int16, int32, int64, uint8, uint16, uint32   int64
//	uint64                                             uint64 (its values may not fit int64)
//	float16, float32, float64                          float64
//	bool                                               bool
//	string, large_string, string_view                  string
//	binary, large_binary, binary_view,
//	fixed_size_binary                                  []byte
//	timestamp (any unit)                               time.Time in the column's time zone, UTC when it has none
//	date32, date64                                     time.Time at UTC
//	null, and a null of any type                       nil (the key is present)
//
// A column of another type (lists, structs, decimals, dictionaries) is an
// error wrapping ErrOutputMapping before anything is read: select columns
// with stream.Options.Columns. Rows allocates a map and boxes a value per
// cell; it is meant for inspection and glue code, Structs and Matrices for
// training loops.
//
//	for rows, err := range typed.Rows(ctx, ds) {
//		if err != nil {
//			return err
//		}
//		for _, r := range rows {
//			fmt.Println(r["id"].(int64), r["s"].(string))
//		}
//	}
func Rows(ctx context.Context, src Source) iter.Seq2[[]map[string]any, error] {
	return func(yield func([]map[string]any, error) bool) {
		p, err := newRowsPlan(src.Schema())
		if err != nil {
			yield(nil, err)
			return
		}
		decodeAll(ctx, src, p.decode)(yield)
	}
}

// Matrix is a batch as a dense, row-major float32 matrix: the value of
// column Columns[c] in row r is Data[r*len(Columns)+c].
type Matrix struct {
	// Columns names the matrix's columns in order. It is shared by every
	// Matrix of one iteration: do not modify it.
	Columns []string
	// Rows is the number of rows, len(Data)/len(Columns).
	Rows int
	// Data holds the values, row after row. The caller owns it.
	Data []float32
}

// Row returns row r of m, a slice of m.Data of len(m.Columns) values.
func (m Matrix) Row(r int) []float32 {
	k := len(m.Columns)
	return m.Data[r*k : (r+1)*k : (r+1)*k]
}

// Matrices streams the rest of src's current epoch as dense float32
// matrices of the given columns, in that order, one per batch and in
// exactly the order of src.Batches (in parallel from a Mapper, like
// Structs): m.Data[r*len(columns)+c] is column columns[c] of row r.
//
//	for m, err := range typed.Matrices(ctx, ds, []string{"x", "y", "label"}) {
//		if err != nil {
//			return err
//		}
//		for r := range m.Rows {
//			features, label := m.Row(r)[:2], m.Row(r)[2]
//			...
//		}
//	}
//
// The columns must exist (by exact name; a column may be repeated) and be
// numeric: int8..int64, uint8..uint64, float16, float32, float64, or bool (0
// or 1). Values are converted as Go's float32 conversion does: integers
// beyond 2^24 and float64 values round to the nearest float32, float64
// values beyond float32's range become ±Inf, NaN stays NaN. Anything else is
// an error wrapping ErrOutputMapping before anything is read. A null is an
// error wrapping ErrNullValue that names the column and the row in the
// batch: fill nulls upstream, or decode with Structs into pointer fields.
// Each batch costs one allocation, its Data, whatever its size.
func Matrices(ctx context.Context, src Source, columns []string) iter.Seq2[Matrix, error] {
	return func(yield func(Matrix, error) bool) {
		p, err := newMatrixPlan(src.Schema(), columns)
		if err != nil {
			yield(Matrix{}, err)
			return
		}
		decodeAll(ctx, src, p.decode)(yield)
	}
}

// batchColumn returns column col of b, checking that it has the type the
// plan was checked against: a batch always has src.Schema(), so this only
// guards the decoders' type assertions.
func batchColumn(b arrow.RecordBatch, col int, name string, want arrow.DataType) (arrow.Array, error) {
	if col >= int(b.NumCols()) {
		return nil, fmt.Errorf("column %q: the batch has %d columns, the schema more", name, b.NumCols())
	}
	arr := b.Column(col)
	if !arrow.TypeEqual(arr.DataType(), want) {
		return nil, fmt.Errorf("column %q: the batch has type %s, the schema %s", name, arr.DataType(), want)
	}
	return arr, nil
}

// firstNull is the first null row of arr, which has nulls.
func firstNull(arr arrow.Array) int {
	for r := range arr.Len() {
		if arr.IsNull(r) {
			return r
		}
	}
	return -1
}

// timeOf converts one Arrow time column's values to time.Time.
type timeOf func(v int64) time.Time

// bytesColumn is the values of a string or binary column back to back:
// value r is data[lo:hi] where lo, hi = offs(r).
type bytesColumn struct {
	data  []byte // Arrow memory, unless owned
	owned bool   // data is a copy in Go memory
	offs  func(r int) (lo, hi int)
}

// bytesOf lays out a string or binary column: contiguous types in place,
// views and fixed-size binaries gathered into one copy.
func bytesOf(arr arrow.Array) (bytesColumn, bool) {
	switch a := arr.(type) {
	case *array.String:
		return offsetBytes(a.ValueOffsets(), a.ValueBytes()), true
	case *array.LargeString:
		return offsetBytes(a.ValueOffsets(), a.ValueBytes()), true
	case *array.Binary:
		return offsetBytes(a.ValueOffsets(), a.ValueBytes()), true
	case *array.LargeBinary:
		return offsetBytes(a.ValueOffsets(), a.ValueBytes()), true
	case *array.StringView:
		return gatherBytes(a.Len(), a.ValueLen, func(r int, dst []byte) { copy(dst, a.Value(r)) }), true
	case *array.BinaryView:
		return gatherBytes(a.Len(), a.ValueLen, func(r int, dst []byte) { copy(dst, a.Value(r)) }), true
	case *array.FixedSizeBinary:
		w := a.DataType().(*arrow.FixedSizeBinaryType).ByteWidth
		return gatherBytes(a.Len(), func(r int) int {
			if a.IsNull(r) {
				return 0
			}
			return w
		}, func(r int, dst []byte) { copy(dst, a.Value(r)) }), true
	}
	return bytesColumn{}, false
}

// str copies the values out as one string, to cut each value from: one
// allocation for the whole column.
func (c bytesColumn) str() string { return string(c.data) }

// bytes copies the values out as one slice, to cut each value from (with
// its capacity capped, so appending to a value cannot overwrite the next).
// It is never nil, so that an empty value is an empty, non-nil slice.
func (c bytesColumn) bytes() []byte {
	if c.owned {
		return c.data
	}
	buf := make([]byte, len(c.data))
	copy(buf, c.data)
	return buf
}

func offsetBytes[O int32 | int64](offs []O, data []byte) bytesColumn {
	var base O
	if len(offs) > 0 {
		base = offs[0]
	}
	return bytesColumn{data: data, offs: func(r int) (int, int) { return int(offs[r] - base), int(offs[r+1] - base) }}
}

func gatherBytes(n int, size func(int) int, put func(int, []byte)) bytesColumn {
	ends := make([]int, n+1)
	for r := range n {
		ends[r+1] = ends[r] + size(r)
	}
	buf := make([]byte, ends[n])
	for r := range n {
		if ends[r+1] > ends[r] {
			put(r, buf[ends[r]:ends[r+1]])
		}
	}
	return bytesColumn{data: buf, owned: true, offs: func(r int) (int, int) { return ends[r], ends[r+1] }}
}

// ---- Structs ----

// setKind is how a field receives a value: through which reflect setter.
type setKind uint8

const (
	setInt setKind = iota + 1
	setUint
	setFloat
	setBool
	setString
	setBytes
	setTime
)

var goTimeType = reflect.TypeFor[time.Time]()

// structPlan maps the columns of a schema onto the fields of a struct type.
type structPlan struct {
	typ    reflect.Type
	fields []structField
}

// structField is one field and the column it is decoded from.
type structField struct {
	col    int
	column string
	dt     arrow.DataType
	name   string       // the field's name, dotted through embedded structs
	typ    reflect.Type // the field's type
	index  []int
	ptr    bool         // typ is *elem
	elem   reflect.Type // the type values are stored as
	set    setKind
	time   timeOf
	nullOK bool // a null leaves the field zero: pointers (nil) and []byte (nil)
}

func newStructPlan(schema *arrow.Schema, t reflect.Type) (*structPlan, error) {
	if t.Kind() != reflect.Struct {
		return nil, fmt.Errorf("stream: Structs[%s]: %w: the type must be a struct", t, ErrOutputMapping)
	}
	p := &structPlan{typ: t}
	fail := func(format string, args ...any) error {
		return fmt.Errorf("stream: Structs[%s]: "+format+": %w", append(append([]any{t}, args...), ErrOutputMapping)...)
	}
	var skipped, viaPointer [][]int // embedded fields whose promoted fields are not decoded / not settable
	hasPrefix := func(list [][]int, index []int) ([]int, bool) {
		for _, pre := range list {
			if len(pre) < len(index) && slices.Equal(pre, index[:len(pre)]) {
				return pre, true
			}
		}
		return nil, false
	}
	byColumn := map[int]string{}
	for _, sf := range reflect.VisibleFields(t) {
		if _, ok := hasPrefix(skipped, sf.Index); ok {
			continue
		}
		name := fieldPath(t, sf.Index)
		tag, tagged := sf.Tag.Lookup("sluice")
		if tagged && tag == "" {
			tagged = false
		}
		if tagged && tag == "-" {
			skipped = append(skipped, sf.Index)
			continue
		}
		if tagged {
			if col, opt, ok := strings.Cut(tag, ","); ok {
				return nil, fail("field %s: unknown option %q in tag sluice:%q", name, opt, tag)
			} else {
				tag = col
			}
		}
		if sf.Anonymous && !tagged {
			et := sf.Type
			if et.Kind() == reflect.Pointer && et.Elem().Kind() == reflect.Struct {
				// Its promoted fields cannot be set without allocating it:
				// mapping one of them is an error, below.
				viaPointer = append(viaPointer, sf.Index)
				continue
			} else if et.Kind() == reflect.Struct && et != goTimeType {
				continue // a container: its promoted fields follow
			}
		}
		if !sf.IsExported() {
			if tagged {
				return nil, fail("field %s is unexported: it cannot be set (remove its tag or export it)", name)
			}
			if sf.Anonymous {
				skipped = append(skipped, sf.Index)
			}
			continue
		}
		if pre, ok := hasPrefix(viaPointer, sf.Index); ok {
			return nil, fail("field %s is promoted through the embedded pointer %s: embed the struct by value, or tag the pointer sluice:\"-\"", name, fieldPath(t, pre))
		}
		if sf.Type.Kind() == reflect.Struct {
			// A struct field decoded as one value (time.Time): do not
			// look into it.
			skipped = append(skipped, sf.Index)
		}
		col, err := findColumn(schema, sf.Name, tag, tagged)
		if err != nil {
			return nil, fail("field %s: %w", name, err)
		}
		if other, ok := byColumn[col]; ok {
			return nil, fail("fields %s and %s both map to column %q", other, name, schema.Field(col).Name)
		}
		byColumn[col] = name
		f := structField{col: col, column: schema.Field(col).Name, dt: schema.Field(col).Type, name: name, typ: sf.Type, index: sf.Index}
		if err := f.conversion(); err != nil {
			return nil, fail("column %q of type %s does not convert to field %s of type %s: %s", f.column, f.dt, f.name, f.typ, err)
		}
		p.fields = append(p.fields, f)
	}
	if len(p.fields) == 0 {
		return nil, fail("no field maps to a column")
	}
	return p, nil
}

// fieldPath names the field at index, dotted through embedded structs.
func fieldPath(t reflect.Type, index []int) string {
	var names []string
	for _, i := range index {
		if t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		f := t.Field(i)
		names = append(names, f.Name)
		t = f.Type
	}
	return strings.Join(names, ".")
}

// findColumn is the column a field decodes: the tag's exact name; without a
// tag, the field's name exactly, else the one column equal to it ignoring
// case.
func findColumn(schema *arrow.Schema, field, tag string, tagged bool) (int, error) {
	want := field
	if tagged {
		want = tag
	}
	switch idx := schema.FieldIndices(want); len(idx) {
	case 1:
		return idx[0], nil
	case 0:
	default:
		return 0, fmt.Errorf("the schema has %d columns named %q", len(idx), want)
	}
	if tagged {
		return 0, fmt.Errorf("no column %q (columns: %s)", want, columnList(schema))
	}
	var found []int
	for i, f := range schema.Fields() {
		if strings.EqualFold(f.Name, field) {
			found = append(found, i)
		}
	}
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		return 0, fmt.Errorf("no column %q, even ignoring case (columns: %s); tag the field sluice:\"column\", or sluice:\"-\" to skip it", field, columnList(schema))
	default:
		var names []string
		for _, i := range found {
			names = append(names, fmt.Sprintf("%q", schema.Field(i).Name))
		}
		return 0, fmt.Errorf("columns %s all match it ignoring case; tag the field with the one it decodes", strings.Join(names, ", "))
	}
}

// columnList names a schema's columns for an error, the first 30 of them.
func columnList(schema *arrow.Schema) string {
	const most = 30
	var names []string
	for i, f := range schema.Fields() {
		if i == most {
			names = append(names, fmt.Sprintf("and %d more", schema.NumFields()-most))
			break
		}
		names = append(names, fmt.Sprintf("%q", f.Name))
	}
	return strings.Join(names, ", ")
}

// conversion chooses how f's column is set into f's field, or says why it
// cannot be.
func (f *structField) conversion() error {
	f.elem = f.typ
	if f.typ.Kind() == reflect.Pointer {
		f.ptr, f.elem, f.nullOK = true, f.typ.Elem(), true
	}
	e := f.elem
	k := e.Kind()
	if f.ptr && k == reflect.Pointer {
		return fmt.Errorf("a pointer to a pointer is not supported")
	}
	isInt := k == reflect.Int || k == reflect.Int8 || k == reflect.Int16 || k == reflect.Int32 || k == reflect.Int64
	isUint := k == reflect.Uint || k == reflect.Uint8 || k == reflect.Uint16 || k == reflect.Uint32 || k == reflect.Uint64 || k == reflect.Uintptr
	isFloat := k == reflect.Float32 || k == reflect.Float64
	isBytes := k == reflect.Slice && e.Elem().Kind() == reflect.Uint8
	id := f.dt.ID()
	if bits, signed := govalue.IntBits(id); bits > 0 {
		switch {
		case isInt && e.Bits() >= bits && (signed || e.Bits() > bits):
			f.set = setInt
		case isInt:
			return fmt.Errorf("%d bits cannot hold every %s value", e.Bits(), f.dt)
		case isUint && !signed && e.Bits() >= bits:
			f.set = setUint
		case isUint && signed:
			return fmt.Errorf("a signed column can hold negative values")
		case isUint:
			return fmt.Errorf("%d bits cannot hold every %s value", e.Bits(), f.dt)
		case isFloat && bits <= 16 || k == reflect.Float64 && bits <= 32:
			f.set = setFloat
		case isFloat:
			mantissa := 53
			if k == reflect.Float32 {
				mantissa = 24
			}
			return fmt.Errorf("%s values beyond 2^%d would round", f.dt, mantissa)
		default:
			return fmt.Errorf("integers convert only to integer and float fields")
		}
		return nil
	}
	switch id {
	case arrow.FLOAT16, arrow.FLOAT32, arrow.FLOAT64:
		switch {
		case isFloat && (id != arrow.FLOAT64 || k == reflect.Float64):
			f.set = setFloat
		case isFloat:
			return fmt.Errorf("float64 values would round; declare the field float64 (Matrices yields float32)")
		default:
			return fmt.Errorf("floats convert only to float fields")
		}
	case arrow.BOOL:
		if k != reflect.Bool {
			return fmt.Errorf("bool converts only to bool fields")
		}
		f.set = setBool
	case arrow.TIMESTAMP, arrow.DATE32, arrow.DATE64:
		if e != goTimeType {
			return fmt.Errorf("timestamps and dates convert only to time.Time fields")
		}
		conv, err := govalue.TimeOf(f.dt)
		if err != nil {
			return fmt.Errorf("time zone: %w", err)
		}
		f.set, f.time = setTime, conv
	default:
		if k := govalue.KindOf(f.dt); k != govalue.AsString && k != govalue.AsBytes {
			return fmt.Errorf("the type is not supported")
		}
		switch {
		case k == reflect.String:
			f.set = setString
		case isBytes:
			f.set, f.nullOK = setBytes, true
		default:
			return fmt.Errorf("strings and binaries convert only to string and []byte fields")
		}
	}
	return nil
}

// decodeStructs decodes one batch into a new []T, column by column.
func decodeStructs[T any](p *structPlan, b arrow.RecordBatch) ([]T, error) {
	n := int(b.NumRows())
	out := make([]T, n)
	rows := reflect.ValueOf(out)
	for i := range p.fields {
		if err := p.fields[i].decode(b, rows, n); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// fieldDest hands out the field of each row, or for a pointer field the
// element of the batch's backing array that it points to.
type fieldDest struct {
	rows    reflect.Value // []T
	index   []int
	backing reflect.Value // []elem, for pointer fields
	arr     arrow.Array
	nulls   bool // arr has nulls, which are skipped (left zero)
}

func (d *fieldDest) skip(r int) bool { return d.nulls && d.arr.IsNull(r) }

func (d *fieldDest) at(r int) reflect.Value {
	v := d.rows.Index(r)
	if len(d.index) == 1 {
		v = v.Field(d.index[0])
	} else {
		v = v.FieldByIndex(d.index)
	}
	if !d.backing.IsValid() {
		return v
	}
	e := d.backing.Index(r)
	v.Set(e.Addr())
	return e
}

func (f *structField) decode(b arrow.RecordBatch, rows reflect.Value, n int) error {
	arr, err := batchColumn(b, f.col, f.column, f.dt)
	if err != nil {
		return err
	}
	if arr.Len() != n {
		return fmt.Errorf("column %q has %d rows, the batch %d", f.column, arr.Len(), n)
	}
	d := fieldDest{rows: rows, index: f.index, arr: arr, nulls: arr.NullN() > 0}
	if d.nulls && !f.nullOK {
		r := firstNull(arr)
		return fmt.Errorf("column %q (%s) row %d, field %s (%s): %w; declare the field *%s to receive nulls as nil", f.column, f.dt, r, f.name, f.typ, ErrNullValue, f.typ)
	}
	if f.ptr {
		d.backing = reflect.MakeSlice(reflect.SliceOf(f.elem), n, n)
	}
	switch a := arr.(type) {
	case *array.Int8:
		setNumbers(&d, a.Values(), f.set)
	case *array.Int16:
		setNumbers(&d, a.Values(), f.set)
	case *array.Int32:
		setNumbers(&d, a.Values(), f.set)
	case *array.Int64:
		setNumbers(&d, a.Values(), f.set)
	case *array.Uint8:
		setNumbers(&d, a.Values(), f.set)
	case *array.Uint16:
		setNumbers(&d, a.Values(), f.set)
	case *array.Uint32:
		setNumbers(&d, a.Values(), f.set)
	case *array.Uint64:
		setNumbers(&d, a.Values(), f.set)
	case *array.Float32:
		setNumbers(&d, a.Values(), f.set)
	case *array.Float64:
		setNumbers(&d, a.Values(), f.set)
	case *array.Float16:
		for r, v := range a.Values() {
			if !d.skip(r) {
				d.at(r).SetFloat(float64(v.Float32()))
			}
		}
	case *array.Boolean:
		for r := range n {
			if !d.skip(r) {
				d.at(r).SetBool(a.Value(r))
			}
		}
	case *array.Timestamp:
		setTimes(&d, a.Values(), f.time)
	case *array.Date32:
		setTimes(&d, a.Values(), f.time)
	case *array.Date64:
		setTimes(&d, a.Values(), f.time)
	default:
		c, ok := bytesOf(arr)
		if !ok {
			return fmt.Errorf("column %q: no decoder for %s", f.column, f.dt)
		}
		if f.set == setString {
			s := c.str()
			for r := range n {
				if !d.skip(r) {
					lo, hi := c.offs(r)
					d.at(r).SetString(s[lo:hi])
				}
			}
			return nil
		}
		buf := c.bytes()
		for r := range n {
			if !d.skip(r) {
				lo, hi := c.offs(r)
				d.at(r).SetBytes(buf[lo:hi:hi])
			}
		}
	}
	return nil
}

// outNumber is the Go element types of Arrow's numeric arrays.
type outNumber interface {
	~int8 | ~int16 | ~int32 | ~int64 | ~uint8 | ~uint16 | ~uint32 | ~uint64 | ~float32 | ~float64
}

// setNumbers sets one numeric column: one loop per setter.
func setNumbers[V outNumber](d *fieldDest, vals []V, set setKind) {
	switch set {
	case setInt:
		for r, v := range vals {
			if !d.skip(r) {
				d.at(r).SetInt(int64(v))
			}
		}
	case setUint:
		for r, v := range vals {
			if !d.skip(r) {
				d.at(r).SetUint(uint64(v))
			}
		}
	case setFloat:
		for r, v := range vals {
			if !d.skip(r) {
				d.at(r).SetFloat(float64(v))
			}
		}
	}
}

// setTimes sets one time column into time.Time fields.
func setTimes[V ~int32 | ~int64](d *fieldDest, vals []V, conv timeOf) {
	for r, v := range vals {
		if !d.skip(r) {
			*d.at(r).Addr().Interface().(*time.Time) = conv(int64(v))
		}
	}
}

// ---- Rows ----

// rowsPlan gives every column the Go value govalue's table says.
type rowsPlan struct {
	names []string
	types []arrow.DataType
	kinds []govalue.Kind
	times []timeOf
}

func newRowsPlan(schema *arrow.Schema) (*rowsPlan, error) {
	p := &rowsPlan{}
	for _, f := range schema.Fields() {
		kind := govalue.KindOf(f.Type)
		var conv timeOf
		switch kind {
		case govalue.None:
			return nil, fmt.Errorf("stream: Rows: column %q of type %s has no Go value mapping (select columns with Options.Columns): %w", f.Name, f.Type, ErrOutputMapping)
		case govalue.AsTime:
			var err error
			if conv, err = govalue.TimeOf(f.Type); err != nil {
				return nil, fmt.Errorf("stream: Rows: column %q of type %s: time zone: %w: %w", f.Name, f.Type, err, ErrOutputMapping)
			}
		}
		p.names = append(p.names, f.Name)
		p.types = append(p.types, f.Type)
		p.kinds = append(p.kinds, kind)
		p.times = append(p.times, conv)
	}
	return p, nil
}

func (p *rowsPlan) decode(b arrow.RecordBatch) ([]map[string]any, error) {
	n := int(b.NumRows())
	rows := make([]map[string]any, n)
	for r := range rows {
		rows[r] = make(map[string]any, len(p.names))
	}
	for c, name := range p.names {
		arr, err := batchColumn(b, c, name, p.types[c])
		if err != nil {
			return nil, err
		}
		if err := column(rows, name, arr, p.kinds[c], p.times[c]); err != nil {
			return nil, err
		}
	}
	return rows, nil
}

// column sets column name of every row.
func column(rows []map[string]any, name string, arr arrow.Array, kind govalue.Kind, conv timeOf) error {
	switch kind {
	case govalue.AsInt64:
		putEach(rows, name, arr, func(r int) any { return govalue.Int64(arr, r) })
	case govalue.AsUint64:
		putEach(rows, name, arr, func(r int) any { return govalue.Uint64(arr, r) })
	case govalue.AsFloat64:
		putEach(rows, name, arr, func(r int) any { return govalue.Float64(arr, r) })
	case govalue.AsBool:
		putEach(rows, name, arr, func(r int) any { return govalue.Bool(arr, r) })
	case govalue.AsNil:
		for r := range rows {
			rows[r][name] = nil
		}
	case govalue.AsTime:
		switch a := arr.(type) {
		case *array.Timestamp:
			putEach(rows, name, arr, func(r int) any { return conv(int64(a.Value(r))) })
		case *array.Date32:
			putEach(rows, name, arr, func(r int) any { return conv(int64(a.Value(r))) })
		case *array.Date64:
			putEach(rows, name, arr, func(r int) any { return conv(int64(a.Value(r))) })
		}
	default:
		// Strings and binaries are cut from one copy of the column's
		// bytes, not copied value by value.
		c, ok := bytesOf(arr)
		if !ok {
			return fmt.Errorf("column %q: no decoder for %s", name, arr.DataType())
		}
		if kind == govalue.AsString {
			s := c.str()
			putEach(rows, name, arr, func(r int) any { lo, hi := c.offs(r); return s[lo:hi] })
			return nil
		}
		buf := c.bytes()
		putEach(rows, name, arr, func(r int) any { lo, hi := c.offs(r); return buf[lo:hi:hi] })
	}
	return nil
}

// putEach sets column name of every row to value(r), or to nil where the
// column is null.
func putEach(rows []map[string]any, name string, arr arrow.Array, value func(r int) any) {
	nulls := arr.NullN() > 0
	for r := range rows {
		if nulls && arr.IsNull(r) {
			rows[r][name] = nil
		} else {
			rows[r][name] = value(r)
		}
	}
}

// ---- Matrices ----

type matrixPlan struct {
	columns []string
	cols    []int
	types   []arrow.DataType
}

func newMatrixPlan(schema *arrow.Schema, columns []string) (*matrixPlan, error) {
	if len(columns) == 0 {
		return nil, fmt.Errorf("stream: Matrices: no columns given: %w", ErrOutputMapping)
	}
	p := &matrixPlan{columns: append([]string(nil), columns...)}
	for _, name := range p.columns {
		idx := schema.FieldIndices(name)
		switch {
		case len(idx) == 0:
			return nil, fmt.Errorf("stream: Matrices: no column %q (columns: %s): %w", name, columnList(schema), ErrOutputMapping)
		case len(idx) > 1:
			return nil, fmt.Errorf("stream: Matrices: the schema has %d columns named %q: %w", len(idx), name, ErrOutputMapping)
		}
		dt := schema.Field(idx[0]).Type
		switch govalue.KindOf(dt) {
		case govalue.AsInt64, govalue.AsUint64, govalue.AsFloat64, govalue.AsBool:
		default:
			return nil, fmt.Errorf("stream: Matrices: column %q of type %s is not numeric (ints, uints, floats and bool are): %w", name, dt, ErrOutputMapping)
		}
		p.cols = append(p.cols, idx[0])
		p.types = append(p.types, dt)
	}
	return p, nil
}

// decode fills one matrix column by column; Data is its only allocation.
func (p *matrixPlan) decode(b arrow.RecordBatch) (Matrix, error) {
	n, k := int(b.NumRows()), len(p.cols)
	for c, col := range p.cols {
		arr, err := batchColumn(b, col, p.columns[c], p.types[c])
		if err != nil {
			return Matrix{}, err
		}
		if arr.NullN() > 0 {
			return Matrix{}, fmt.Errorf("column %q (%s) row %d: %w; Matrices needs a value in every cell", p.columns[c], arr.DataType(), firstNull(arr), ErrNullValue)
		}
	}
	data := make([]float32, n*k)
	for c, col := range p.cols {
		switch a := b.Column(col).(type) {
		case *array.Int8:
			fillColumn(data, a.Values(), c, k)
		case *array.Int16:
			fillColumn(data, a.Values(), c, k)
		case *array.Int32:
			fillColumn(data, a.Values(), c, k)
		case *array.Int64:
			fillColumn(data, a.Values(), c, k)
		case *array.Uint8:
			fillColumn(data, a.Values(), c, k)
		case *array.Uint16:
			fillColumn(data, a.Values(), c, k)
		case *array.Uint32:
			fillColumn(data, a.Values(), c, k)
		case *array.Uint64:
			fillColumn(data, a.Values(), c, k)
		case *array.Float32:
			fillColumn(data, a.Values(), c, k)
		case *array.Float64:
			fillColumn(data, a.Values(), c, k)
		case *array.Float16:
			for r, v := range a.Values() {
				data[r*k+c] = v.Float32()
			}
		case *array.Boolean:
			for r := range n {
				if a.Value(r) {
					data[r*k+c] = 1
				}
			}
		default:
			return Matrix{}, fmt.Errorf("column %q: no decoder for %s", p.columns[c], a.DataType())
		}
	}
	return Matrix{Columns: p.columns, Rows: n, Data: data}, nil
}

func fillColumn[V outNumber](data []float32, vals []V, c, k int) {
	for r, v := range vals {
		data[r*k+c] = float32(v)
	}
}
