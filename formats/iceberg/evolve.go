package iceberg

import (
	"context"
	"encoding/hex"
	"fmt"
	"math"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/extensions"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/arrow/scalar"
	ice "github.com/apache/iceberg-go"

	"github.com/sluicedata/sluice/formats"
)

// convertColumn is formats.File.Convert for the table's data files: a
// nested column written under an older schema is read into the current
// one by field id, at every depth: struct fields matched by id (renamed
// ones keep their data, added ones read as null, dropped ones go),
// list elements and map keys and values converted in place, primitives
// promoted (int to long, float to double, decimal precision).
//
// consts are the values, by field id, of nested fields the file lacks (an
// identity partition of the field, else its initial default); a field
// the file lacks that consts does not name reads as null.
func convertColumn(file, want arrow.Field, consts map[int]scalar.Scalar) (formats.Converter, error) {
	conv, err := converter(file.Type, want.Type, consts)
	if err != nil || conv == nil {
		return nil, err
	}
	return func(a arrow.Array, mem memory.Allocator) (arrow.Array, error) {
		d, err := conv(a.Data(), mem)
		if err != nil {
			return nil, err
		}
		defer d.Release()
		return array.MakeFromData(d), nil
	}, nil
}

// dataConverter converts one array's data (whole, at its offset); nil
// where the types agree.
type dataConverter func(d arrow.ArrayData, mem memory.Allocator) (arrow.ArrayData, error)

func converter(file, want arrow.DataType, consts map[int]scalar.Scalar) (dataConverter, error) {
	// Field ids count: a file's struct may hold the table's fields under
	// each other's names.
	if arrow.TypeEqual(file, want, arrow.CheckMetadata()) {
		return nil, nil
	}
	switch want := want.(type) {
	case *extensions.VariantType:
		return variantConverter(file, want)
	case *arrow.StructType:
		f, ok := file.(*arrow.StructType)
		if !ok {
			return nil, fmt.Errorf("%s in the file cannot be read as %s", file, want)
		}
		from := make([]int, want.NumFields()) // file child of each wanted one, or -1
		subs := make([]dataConverter, want.NumFields())
		fill := make([]scalar.Scalar, want.NumFields())
		for i, wf := range want.Fields() {
			from[i] = matchField(f, wf)
			if from[i] < 0 {
				if id, ok := fieldID(wf); ok && consts[id] != nil && consts[id].IsValid() {
					fill[i] = consts[id]
					continue
				}
				if !wf.Nullable {
					// The spec's projection has no value for it: null
					// would be a value the table cannot hold.
					return nil, fmt.Errorf("required field %q%s is not in the file", wf.Name, idText(wf))
				}
				continue
			}
			var err error
			if subs[i], err = converter(f.Field(from[i]).Type, wf.Type, consts); err != nil {
				return nil, fmt.Errorf("field %q: %w", wf.Name, err)
			}
		}
		return structConverter(want, from, subs, fill), nil
	case *arrow.MapType:
		f, ok := file.(*arrow.MapType)
		if !ok {
			return nil, fmt.Errorf("%s in the file cannot be read as %s", file, want)
		}
		entries, err := entriesConverter(f, want, consts)
		if err != nil {
			return nil, err
		}
		return listConverter(want, entries), nil
	case *arrow.ListType, *arrow.LargeListType:
		if file.ID() != want.ID() {
			return nil, fmt.Errorf("%s in the file cannot be read as %s", file, want)
		}
		elem, err := converter(file.(arrow.ListLikeType).Elem(), want.(arrow.ListLikeType).Elem(), consts)
		if err != nil {
			return nil, fmt.Errorf("list element: %w", err)
		}
		return listConverter(want, elem), nil
	}
	if !promotes(file, want) {
		return nil, fmt.Errorf("%s in the file cannot be read as %s", file, want)
	}
	return func(d arrow.ArrayData, mem memory.Allocator) (arrow.ArrayData, error) {
		a := array.MakeFromData(d)
		defer a.Release()
		out, err := compute.CastArray(compute.WithAllocator(context.Background(), mem), a, compute.SafeCastOptions(want))
		if err != nil {
			return nil, err
		}
		defer out.Release()
		od := out.Data()
		od.Retain()
		return od, nil
	}, nil
}

// promotes reports whether Iceberg's type promotions read file as want.
func promotes(file, want arrow.DataType) bool {
	switch {
	case file.ID() == arrow.INT32 && want.ID() == arrow.INT64,
		file.ID() == arrow.FLOAT32 && want.ID() == arrow.FLOAT64:
		return true
	}
	f, ok1 := file.(arrow.DecimalType)
	w, ok2 := want.(arrow.DecimalType)
	return ok1 && ok2 && f.GetScale() == w.GetScale() && w.GetPrecision() >= f.GetPrecision()
}

// matchField is the index of the file's field that is wf: by field id; by
// name where wf or the file's struct carries none (a writer that gave ids
// to top-level columns only); -1 if none.
func matchField(file *arrow.StructType, wf arrow.Field) int {
	if id, ok := fieldID(wf); ok {
		withIDs := false
		for i, f := range file.Fields() {
			if fid, ok := fieldID(f); ok {
				if fid == id {
					return i
				}
				withIDs = true
			}
		}
		if withIDs {
			return -1
		}
	}
	if i, ok := file.FieldIdx(wf.Name); ok {
		return i
	}
	return -1
}

// idText is ", field id N" where f carries one, for errors.
func idText(f arrow.Field) string {
	if id, ok := fieldID(f); ok {
		return " (field id " + strconv.Itoa(id) + ")"
	}
	return ""
}

// structConverter builds want's struct from the file's children from[i]
// (converted by subs[i]); where from[i] < 0, fill[i] in every row, or
// nulls where fill[i] is nil; keeping the struct's own validity and
// offset.
func structConverter(want *arrow.StructType, from []int, subs []dataConverter, fill []scalar.Scalar) dataConverter {
	return func(d arrow.ArrayData, mem memory.Allocator) (arrow.ArrayData, error) {
		n := d.Offset() + d.Len() // children are read at the struct's offset
		children := make([]arrow.ArrayData, len(from))
		defer func() {
			for _, c := range children {
				if c != nil {
					c.Release()
				}
			}
		}()
		for i, j := range from {
			if j < 0 {
				var c arrow.Array
				if fill != nil && fill[i] != nil {
					sc := fill[i]
					if !arrow.TypeEqual(sc.DataType(), want.Field(i).Type) {
						var err error
						if sc, err = sc.CastTo(want.Field(i).Type); err != nil {
							return nil, fmt.Errorf("field %q: %w", want.Field(i).Name, err)
						}
					}
					var err error
					if c, err = scalar.MakeArrayFromScalar(sc, n, mem); err != nil {
						return nil, fmt.Errorf("field %q: %w", want.Field(i).Name, err)
					}
				} else {
					c = array.MakeArrayOfNull(mem, want.Field(i).Type, n)
				}
				children[i] = c.Data()
				children[i].Retain()
				c.Release()
				continue
			}
			c := d.Children()[j]
			if subs[i] == nil {
				c.Retain()
				children[i] = c
				continue
			}
			var err error
			if children[i], err = subs[i](c, mem); err != nil {
				return nil, fmt.Errorf("field %q: %w", want.Field(i).Name, err)
			}
		}
		return array.NewData(want, d.Len(), []*memory.Buffer{d.Buffers()[0]}, children, d.NullN(), d.Offset()), nil
	}
}

// entriesConverter converts a map's entries (a struct of key and value)
// by position.
func entriesConverter(file, want *arrow.MapType, consts map[int]scalar.Scalar) (dataConverter, error) {
	key, err := converter(file.KeyType(), want.KeyType(), consts)
	if err != nil {
		return nil, fmt.Errorf("map key: %w", err)
	}
	item, err := converter(file.ItemType(), want.ItemType(), consts)
	if err != nil {
		return nil, fmt.Errorf("map value: %w", err)
	}
	return structConverter(want.Elem().(*arrow.StructType), []int{0, 1}, []dataConverter{key, item}, nil), nil
}

// listConverter relabels a list (or map) as want, its values converted by
// elem: the offsets and validity stay.
func listConverter(want arrow.DataType, elem dataConverter) dataConverter {
	return func(d arrow.ArrayData, mem memory.Allocator) (arrow.ArrayData, error) {
		child := d.Children()[0]
		if elem != nil {
			var err error
			if child, err = elem(child, mem); err != nil {
				return nil, err
			}
			defer child.Release()
		}
		return array.NewData(want, d.Len(), d.Buffers(), []arrow.ArrayData{child}, d.NullN(), d.Offset()), nil
	}
}

// initialDefaults are the initial defaults of the current schema's
// top-level columns (v3: the value a column added after a file was
// written reads as in that file), as Arrow scalars of the columns' types.
func initialDefaults(schema *ice.Schema, as *arrow.Schema) (map[string]scalar.Scalar, error) {
	var out map[string]scalar.Scalar
	for i, f := range schema.Fields() {
		if f.InitialDefault == nil {
			continue
		}
		sc, err := defaultScalar(f, as.Field(i).Type)
		if err != nil {
			return nil, fmt.Errorf("initial default of column %q (%v): %w", f.Name, f.InitialDefault, err)
		}
		if out == nil {
			out = map[string]scalar.Scalar{}
		}
		out[f.Name] = sc
	}
	return out, nil
}

// defaultScalar turns a field's initial default, as iceberg-go holds it
// (a value of the spec's JSON single-value form, or a typed value), into
// an Arrow scalar of typ.
func defaultScalar(f ice.NestedField, typ arrow.DataType) (scalar.Scalar, error) {
	lit, err := defaultLiteral(f.InitialDefault, f.Type)
	if err != nil {
		return nil, err
	}
	return literalScalar(lit, typ)
}

// literalScalar is an Iceberg value as an Arrow scalar of typ, the type
// the table's schema gives its field.
func literalScalar(lit ice.Literal, typ arrow.DataType) (scalar.Scalar, error) {
	switch l := lit.(type) {
	case ice.BoolLiteral:
		return scalar.NewBooleanScalar(bool(l)), nil
	case ice.Int32Literal:
		return scalar.NewInt32Scalar(int32(l)), nil
	case ice.Int64Literal:
		return scalar.NewInt64Scalar(int64(l)), nil
	case ice.Float32Literal:
		return scalar.NewFloat32Scalar(float32(l)), nil
	case ice.Float64Literal:
		return scalar.NewFloat64Scalar(float64(l)), nil
	case ice.StringLiteral:
		return scalar.NewStringScalar(string(l)), nil
	case ice.DateLiteral:
		return scalar.NewDate32Scalar(arrow.Date32(l)), nil
	case ice.TimeLiteral:
		return scalar.NewTime64Scalar(arrow.Time64(l), typ), nil
	case ice.TimestampLiteral:
		return scalar.NewTimestampScalar(arrow.Timestamp(l), typ), nil
	case ice.TimestampNsLiteral:
		return scalar.NewTimestampScalar(arrow.Timestamp(l), typ), nil
	case ice.DecimalLiteral:
		if _, ok := typ.(*arrow.Decimal128Type); ok {
			return scalar.NewDecimal128Scalar(l.Val, typ), nil
		}
	case ice.BinaryLiteral:
		return scalar.NewBinaryScalar(memory.NewBufferBytes(l), typ), nil
	case ice.FixedLiteral:
		if _, ok := typ.(*arrow.FixedSizeBinaryType); ok {
			return scalar.NewFixedSizeBinaryScalar(memory.NewBufferBytes(l), typ), nil
		}
	case ice.UUIDLiteral:
		if ext, ok := typ.(*extensions.UUIDType); ok {
			b := l[:]
			return scalar.NewExtensionScalar(scalar.NewFixedSizeBinaryScalar(memory.NewBufferBytes(b), ext.StorageType()), typ), nil
		}
	}
	return nil, fmt.Errorf("a %s value read as %s is not supported", lit.Type(), typ)
}

// defaultLiteral reads a default value as iceberg-go leaves it: parsed
// from the metadata's JSON (a bool, a number, a string), or typed where
// the table was evolved in this process.
func defaultLiteral(v any, typ ice.Type) (ice.Literal, error) {
	switch v := v.(type) {
	case ice.Literal:
		return v.To(typ)
	case bool:
		return ice.NewLiteral(v).To(typ)
	case string:
		switch typ.(type) {
		case ice.BinaryType, ice.FixedType:
			b, err := hex.DecodeString(v) // the spec writes bytes as hex
			if err != nil {
				return nil, err
			}
			return ice.BinaryLiteral(b).To(typ)
		}
		return ice.StringLiteral(v).To(typ)
	case []byte:
		return ice.BinaryLiteral(v).To(typ)
	case ice.Decimal:
		return ice.DecimalLiteral(v).To(typ)
	case float64:
		switch typ.(type) {
		case ice.Float32Type, ice.Float64Type:
			return ice.NewLiteral(v).To(typ)
		}
		if v != math.Trunc(v) || math.Abs(v) > 1<<53 {
			return nil, fmt.Errorf("%v is not an exact integer", v)
		}
		return integerLiteral(int64(v), typ)
	case float32:
		return ice.NewLiteral(v).To(typ)
	case int:
		return integerLiteral(int64(v), typ)
	case int32:
		return integerLiteral(int64(v), typ)
	case int64:
		return integerLiteral(v, typ)
	case ice.Date:
		return integerLiteral(int64(v), typ)
	case ice.Time:
		return integerLiteral(int64(v), typ)
	case ice.Timestamp:
		return integerLiteral(int64(v), typ)
	case ice.TimestampNano:
		return integerLiteral(int64(v), typ)
	}
	return nil, fmt.Errorf("a default of Go type %T", v)
}

// integerLiteral is v as a literal of an integer-backed type: int and long
// as numbers, date as days, time and timestamps in their units.
func integerLiteral(v int64, typ ice.Type) (ice.Literal, error) {
	switch typ.(type) {
	case ice.Int32Type:
		if v < math.MinInt32 || v > math.MaxInt32 {
			return nil, fmt.Errorf("%d overflows int", v)
		}
		return ice.Int32Literal(v), nil
	case ice.Int64Type:
		return ice.Int64Literal(v), nil
	case ice.DateType:
		if v < math.MinInt32 || v > math.MaxInt32 {
			return nil, fmt.Errorf("%d overflows date", v)
		}
		return ice.DateLiteral(v), nil
	case ice.TimeType:
		return ice.TimeLiteral(v), nil
	case ice.TimestampType, ice.TimestampTzType:
		return ice.TimestampLiteral(v), nil
	case ice.TimestampNsType, ice.TimestampTzNsType:
		return ice.TimestampNsLiteral(v), nil
	case ice.Float32Type, ice.Float64Type:
		return ice.NewLiteral(float64(v)).To(typ)
	}
	return nil, fmt.Errorf("the number %s as %s", strconv.FormatInt(v, 10), typ)
}

// variantConverter reads a variant the file stores as a plain struct of
// two binary fields, metadata and value, without the VARIANT annotation
// (as Trino writes them) when the table says variant: the same buffers
// under the variant type the Parquet driver gives an annotated one. A
// struct with other fields, or of other types, is refused by name; so is
// a row whose metadata or value is null where the variant is not, which
// no variant can be.
func variantConverter(file arrow.DataType, want *extensions.VariantType) (dataConverter, error) {
	f, ok := file.(*arrow.StructType)
	if !ok {
		return nil, fmt.Errorf("%s in the file cannot be read as a variant: not a struct of binary metadata and value", file)
	}
	storage := want.StorageType().(*arrow.StructType)
	from := make([]int, storage.NumFields())
	for i, wf := range storage.Fields() {
		j, ok := f.FieldIdx(wf.Name)
		if !ok {
			return nil, fmt.Errorf("%s in the file cannot be read as a variant: it has no field %q", file, wf.Name)
		}
		if got := f.Field(j).Type; !arrow.TypeEqual(got, wf.Type) {
			return nil, fmt.Errorf("%s in the file cannot be read as a variant: field %q is %s, not %s", file, wf.Name, got, wf.Type)
		}
		from[i] = j
	}
	if f.NumFields() != storage.NumFields() {
		for _, ff := range f.Fields() {
			if _, ok := storage.FieldIdx(ff.Name); !ok {
				return nil, fmt.Errorf("%s in the file cannot be read as a variant: field %q is not a variant's (a shredded variant needs the VARIANT annotation)", file, ff.Name)
			}
		}
	}
	return func(d arrow.ArrayData, mem memory.Allocator) (arrow.ArrayData, error) {
		children := make([]arrow.ArrayData, len(from))
		for i, j := range from {
			c := d.Children()[j]
			if c.NullN() > 0 {
				if r := nullWhereValid(d, c); r >= 0 {
					return nil, fmt.Errorf("row %d of the batch: the variant's %s is null", r, storage.Field(i).Name)
				}
			}
			children[i] = c
		}
		return array.NewData(want, d.Len(), d.Buffers(), children, d.NullN(), d.Offset()), nil
	}, nil
}

// nullWhereValid is the first row of parent whose child value is null
// where the parent is not, or -1.
func nullWhereValid(parent, child arrow.ArrayData) int {
	p := array.MakeFromData(parent)
	defer p.Release()
	c := array.MakeFromData(child)
	defer c.Release()
	for r := range parent.Len() {
		if p.IsValid(r) && c.IsNull(parent.Offset()+r) {
			return r
		}
	}
	return -1
}
