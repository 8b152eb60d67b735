package parquet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/extensions"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	pqschema "github.com/apache/arrow-go/v18/parquet/schema"
	"github.com/apache/arrow-go/v18/parquet/variant"

	"github.com/sluicedata/sluice/formats"
	"github.com/sluicedata/sluice/formats/internal/panics"
)

// InvalidUTF8 says what a read does with a STRING value that is not valid
// UTF-8. Parquet writers do not all check, and arrow-go builds Arrow strings
// from the bytes as they are.
type InvalidUTF8 int

const (
	// ErrorOnInvalidUTF8, the default, fails the read with an error naming
	// the file, row group, column and row: the value is not what its type
	// says.
	ErrorOnInvalidUTF8 InvalidUTF8 = iota
	// ReplaceInvalidUTF8 replaces each invalid byte sequence of a top-level
	// string column with U+FFFD, the replacement character. (Strings inside
	// structs and lists are checked under ErrorOnInvalidUTF8 only.)
	ReplaceInvalidUTF8
)

// checkBatch checks the values of a decoded batch that arrow-go does not:
// that strings are UTF-8 (repairing them under ReplaceInvalidUTF8) and that
// every VARIANT value decodes. first is the file row of the batch's first
// row; the columns known holds were checked as they were decoded. It returns b itself, or a repaired copy; b is released where it is
// not returned.
func checkBatch(b arrow.RecordBatch, first int64, policy InvalidUTF8, mem memory.Allocator, known *knownUTF8) (arrow.RecordBatch, error) {
	var cols []arrow.Array
	for c, col := range b.Columns() {
		if known.has(col) {
			continue
		}
		name := b.Schema().Field(c).Name
		if policy == ReplaceInvalidUTF8 {
			if fixed := replaceInvalidUTF8(col, mem); fixed != nil {
				if cols == nil {
					cols = make([]arrow.Array, b.NumCols())
				}
				cols[c] = fixed
				continue
			}
		}
		if row, err := checkValues(col); err != nil {
			for _, a := range cols {
				if a != nil {
					a.Release()
				}
			}
			b.Release()
			return nil, fmt.Errorf("%w: column %q row %d: %w", formats.ErrCorrupt, name, first+int64(row), err)
		}
	}
	if cols == nil {
		return b, nil
	}
	for c := range cols {
		if cols[c] == nil {
			cols[c] = b.Column(c)
			cols[c].Retain()
		}
	}
	out := array.NewRecordBatch(b.Schema(), cols, b.NumRows())
	for _, a := range cols {
		a.Release()
	}
	b.Release()
	return out, nil
}

// knownUTF8 holds the string columns of a batch being read that are known
// to be valid UTF-8 (flatdecode checked them as it built them, a
// dictionary's entries once), by their value buffer, which the batch's
// slices and reorderings of the column share. A nil *knownUTF8 holds none.
type knownUTF8 struct{ bufs []*memory.Buffer }

func (k *knownUTF8) add(a arrow.Array) {
	if buf := valueBuffer(a); buf != nil {
		k.bufs = append(k.bufs, buf)
	}
}

func (k *knownUTF8) has(a arrow.Array) bool {
	if k == nil {
		return false
	}
	buf := valueBuffer(a)
	return buf != nil && slices.Contains(k.bufs, buf)
}

// reset forgets the columns, once their batch is checked.
func (k *knownUTF8) reset() {
	clear(k.bufs)
	k.bufs = k.bufs[:0]
}

// valueBuffer is the buffer of a string array's bytes, or nil for any
// other array.
func valueBuffer(a arrow.Array) *memory.Buffer {
	switch a.DataType().ID() {
	case arrow.STRING, arrow.LARGE_STRING:
		if bufs := a.Data().Buffers(); len(bufs) == 3 {
			return bufs[2]
		}
	}
	return nil
}

// checkValues returns the first row of a whose value is a string that is
// not UTF-8 or a VARIANT that does not decode, with the reason.
func checkValues(a arrow.Array) (int, error) {
	switch a := a.(type) {
	case *array.String:
		if a.Len() > 0 && !allUTF8(a.ValueOffsets(), a.ValueBytes()) {
			return firstInvalid(a)
		}
	case *array.LargeString:
		if a.Len() > 0 && !allUTF8(a.ValueOffsets(), a.ValueBytes()) {
			return firstInvalid(a)
		}
	case *extensions.JSONArray:
		return checkValues(a.Storage())
	case *extensions.VariantArray:
		for i := range a.Len() {
			if a.IsNull(i) {
				continue
			}
			v, err := a.Value(i)
			if err == nil {
				budget := len(v.Bytes()) + 1
				err = checkVariant(v, 0, &budget)
			}
			if err != nil {
				return i, fmt.Errorf("VARIANT value cannot be decoded: %w", err)
			}
		}
	case *array.Struct:
		for f := range a.NumField() {
			if row, err := checkValues(a.Field(f)); err != nil {
				return row, err
			}
		}
	case array.ListLike:
		values := a.ListValues()
		if row, err := checkValues(values); err != nil {
			// row is a position among the values: find the list holding it.
			for i := range a.Len() {
				if start, end := a.ValueOffsets(i); int64(row) >= start && int64(row) < end {
					return i, err
				}
			}
			return 0, err
		}
	}
	return 0, nil
}

// allUTF8 reports whether every value of a string array is valid UTF-8,
// looking at its bytes in one pass: the values together are valid UTF-8
// and none starts inside a character (on a continuation byte) if and only
// if each is valid on its own, since each then ends where a character
// starts. offs are the array's offsets and bytes its values' bytes from
// offs[0] on (as ValueBytes returns them). false says only that the values
// must be looked at one by one: a null slot may cover bytes that are not
// UTF-8.
func allUTF8[O int32 | int64](offs []O, bytes []byte) bool {
	if len(offs) == 0 {
		return true
	}
	base, end := offs[0], offs[len(offs)-1]
	if end < base || int64(end-base) != int64(len(bytes)) || !utf8.Valid(bytes) {
		return false
	}
	for _, o := range offs[1 : len(offs)-1] {
		if o < base || o > end {
			return false
		}
		if o < end && !utf8.RuneStart(bytes[o-base]) {
			return false
		}
	}
	return true
}

// stringArray is what firstInvalid asks of a string array.
type stringArray interface {
	Len() int
	IsValid(i int) bool
	Value(i int) string
}

// firstInvalid returns the first row of a whose value is not UTF-8, value
// by value (see allUTF8), with the reason; 0 and nil where there is none.
func firstInvalid(a stringArray) (int, error) {
	for i := range a.Len() {
		if a.IsValid(i) && !utf8.ValidString(a.Value(i)) {
			return i, fmt.Errorf("string is not valid UTF-8: %q (the invalid UTF-8 option \"replace\" reads it with U+FFFD)", a.Value(i))
		}
	}
	return 0, nil
}

// maxVariantDepth bounds the nesting checkVariant follows: a malformed value
// must not exhaust the stack.
const maxVariantDepth = 1000

// checkVariant walks v as a reader of it will. arrow-go checks a value's
// bytes lazily and panics on some malformed ones: a panic is an error here.
//
// budget is how many more values the walk may visit: values of a
// well-formed VARIANT do not share bytes, so there are no more of them than
// bytes, whereas forged offsets that point children at shared bytes would
// make the walk exponential.
func checkVariant(v variant.Value, depth int, budget *int) (err error) {
	if depth > maxVariantDepth {
		return fmt.Errorf("nested more than %d deep", maxVariantDepth)
	}
	if *budget--; *budget < 0 {
		return errors.New("more values than bytes: nested values share bytes")
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("malformed value: %v", r)
		}
	}()
	switch x := v.Value().(type) {
	case variant.ObjectValue:
		// arrow-go does not check counts against the bytes: an offset
		// each, so no more elements than bytes.
		if int64(x.NumElements()) > int64(len(v.Bytes())) {
			return fmt.Errorf("object claims %d fields in %d bytes", x.NumElements(), len(v.Bytes()))
		}
		for k := range x.NumElements() {
			f, err := x.FieldAt(k)
			if err != nil {
				return err
			}
			if err := checkVariant(f.Value, depth+1, budget); err != nil {
				return fmt.Errorf("field %q: %w", f.Key, err)
			}
		}
	case variant.ArrayValue:
		if int64(x.Len()) > int64(len(v.Bytes())) {
			return fmt.Errorf("array claims %d elements in %d bytes", x.Len(), len(v.Bytes()))
		}
		for k := range x.Len() {
			e, err := x.Value(k)
			if err != nil {
				return err
			}
			if err := checkVariant(e, depth+1, budget); err != nil {
				return fmt.Errorf("element %d: %w", k, err)
			}
		}
	}
	return nil
}

// replaceInvalidUTF8 returns a copy of a top-level string column with
// invalid sequences replaced by U+FFFD, or nil where a needs no repair.
func replaceInvalidUTF8(a arrow.Array, mem memory.Allocator) arrow.Array {
	s, ok := a.(*array.String)
	if !ok {
		return nil
	}
	if s.Len() == 0 || allUTF8(s.ValueOffsets(), s.ValueBytes()) {
		return nil
	}
	if _, err := firstInvalid(s); err == nil {
		return nil
	}
	b := array.NewStringBuilder(mem)
	defer b.Release()
	b.Reserve(s.Len())
	for i := range s.Len() {
		if s.IsNull(i) {
			b.AppendNull()
			continue
		}
		b.Append(strings.ToValidUTF8(s.Value(i), "\uFFFD"))
	}
	return b.NewArray()
}

// guardRowGroup runs read, the decoding of one row group, and names the
// column at fault when arrow-go fails without saying which (found by
// decoding each selected column of the row group alone, which costs time only
// on failure). A panic of arrow-go's becomes a one-line error saying what
// it tells of the file (see panics.New); its stack goes to the debug log.
func guardRowGroup(ctx context.Context, fr *pqarrow.FileReader, rg int, leaves []int, read func() error) (err error) {
	faulty := func() string {
		for _, leaf := range leaves {
			if decodeFails(ctx, fr, rg, leaf) {
				return fmt.Sprintf("column %q", fr.ParquetReader().MetaData().Schema.Column(leaf).ColumnPath().String())
			}
		}
		return ""
	}
	defer func() {
		r := recover()
		if r == nil {
			return
		}
		pe := panics.New(r)
		slog.Debug("parquet: decoder panicked", "row_group", rg, "panic", r, "stack", string(debug.Stack()))
		if col := faulty(); col != "" {
			err = fmt.Errorf("%w: %s: %w", formats.ErrCorrupt, col, pe)
		} else {
			err = fmt.Errorf("%w: %w", formats.ErrCorrupt, pe)
		}
	}()
	err = read()
	if err != nil && errors.Is(err, formats.ErrCorrupt) && ctx.Err() == nil && !strings.Contains(err.Error(), "column ") {
		if col := faulty(); col != "" {
			err = fmt.Errorf("%s: %w", col, err)
		}
	}
	return err
}

// decodeFails reports whether decoding leaf alone in row group rg fails.
func decodeFails(ctx context.Context, fr *pqarrow.FileReader, rg, leaf int) (failed bool) {
	defer func() {
		if recover() != nil {
			failed = true
		}
	}()
	tbl, err := fr.RowGroup(rg).ReadTable(ctx, []int{leaf})
	if err != nil {
		return true
	}
	tbl.Release()
	return false
}

// annotateStrings gives the top-level BYTE_ARRAY columns annotated JSON or
// ENUM the Arrow types of what they hold: arrow-go reads both as binary,
// which would reach users as bytes (base64 in JSON) instead of text. ENUM
// becomes a string, JSON the arrow.json extension over a string. Reads turn
// the decoded binary into them without a copy (see reinterpret).
func annotateStrings(schema *arrow.Schema, manifest *pqarrow.SchemaManifest, pq *pqschema.Schema) *arrow.Schema {
	fields := schema.Fields()
	changed := false
	for i := range manifest.Fields {
		sf := &manifest.Fields[i]
		if !sf.IsLeaf() || i >= len(fields) || !arrow.TypeEqual(fields[i].Type, arrow.BinaryTypes.Binary) {
			continue
		}
		switch pq.Column(sf.ColIndex).LogicalType().(type) {
		case pqschema.EnumLogicalType:
			fields[i].Type = arrow.BinaryTypes.String
			changed = true
		case pqschema.JSONLogicalType:
			jt, err := extensions.NewJSONType(arrow.BinaryTypes.String)
			if err != nil {
				continue
			}
			fields[i].Type = jt
			changed = true
		}
	}
	if !changed {
		return schema
	}
	md := schema.Metadata()
	return arrow.NewSchema(fields, &md)
}

// reinterpret returns col, a decoded binary column, as the string or
// arrow.json type that annotateStrings gave its field, sharing its buffers;
// ok is false for any other pair of types.
func reinterpret(col arrow.Array, want arrow.DataType) (out arrow.Array, ok bool) {
	if !arrow.TypeEqual(col.DataType(), arrow.BinaryTypes.Binary) {
		return nil, false
	}
	switch want := want.(type) {
	case *arrow.StringType:
		d := col.Data()
		data := array.NewData(arrow.BinaryTypes.String, d.Len(), d.Buffers(), nil, d.NullN(), d.Offset())
		defer data.Release()
		return array.MakeFromData(data), true
	case *extensions.JSONType:
		s, _ := reinterpret(col, arrow.BinaryTypes.String)
		defer s.Release()
		return array.NewExtensionArrayWithStorage(want, s), true
	}
	return nil, false
}
