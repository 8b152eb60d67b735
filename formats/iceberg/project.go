package iceberg

import (
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/scalar"
	ice "github.com/apache/iceberg-go"

	"github.com/sluicedata/sluice/formats"
)

// The spec's column projection rule: a field is found in a data file by
// its field id; where the file carries no ids (a table migrated from
// Hive), by the names the table's name mapping gives that id, at every
// depth. A field the file lacks reads as the file's value of an identity
// partition of it, in the partition spec the file was written with; else
// as the field's initial default; else as null. A required field that
// resolves to none of these is an error, never nulls.

// fieldID is the field id an Arrow field carries, if any (arrow-go marks
// a Parquet field without one -1).
func fieldID(f arrow.Field) (int, bool) {
	v, ok := f.Metadata.GetValue(fieldIDKey)
	if !ok {
		return 0, false
	}
	id, err := strconv.Atoi(v)
	if err != nil || id < 0 {
		return 0, false
	}
	return id, true
}

// withID is f carrying field id id (-1: none), its other metadata kept.
func withID(f arrow.Field, id int) arrow.Field {
	keys, vals := []string{fieldIDKey}, []string{strconv.Itoa(id)}
	for i, k := range f.Metadata.Keys() {
		if k != fieldIDKey {
			keys, vals = append(keys, k), append(vals, f.Metadata.Values()[i])
		}
	}
	f.Metadata = arrow.NewMetadata(keys, vals)
	return f
}

// mappedByID is the name mapping's entry of field id, at any depth, or
// nil.
func mappedByID(fields []ice.MappedField, id int) *ice.MappedField {
	for i := range fields {
		if fields[i].FieldID != nil && *fields[i].FieldID == id {
			return &fields[i]
		}
		if m := mappedByID(fields[i].Fields, id); m != nil {
			return m
		}
	}
	return nil
}

// mappedByName is the entry of fields that lists name, or nil.
func mappedByName(fields []ice.MappedField, name string) *ice.MappedField {
	for i := range fields {
		for _, n := range fields[i].Names {
			if n == name {
				return &fields[i]
			}
		}
	}
	return nil
}

// withMappedIDs is f, a field of a data file written without field ids,
// with the ids the name mapping entry m gives it and, below it, its
// struct fields (by name), list element and map key and value (by the
// names "element", "key" and "value" the mapping gives them): what the
// file would carry had its writer written ids. A field the mapping does
// not name carries none (see matchField).
func withMappedIDs(f arrow.Field, m *ice.MappedField) arrow.Field {
	id := -1
	var sub []ice.MappedField
	if m != nil {
		id = m.ID()
		sub = m.Fields
	}
	f = withID(f, id)
	child := func(c arrow.Field, name string) arrow.Field {
		return withMappedIDs(c, mappedByName(sub, name))
	}
	switch t := f.Type.(type) {
	case *arrow.StructType:
		fs := make([]arrow.Field, t.NumFields())
		for i, c := range t.Fields() {
			fs[i] = child(c, c.Name)
		}
		f.Type = arrow.StructOf(fs...)
	case *arrow.ListType:
		f.Type = arrow.ListOfField(child(t.ElemField(), "element"))
	case *arrow.LargeListType:
		f.Type = arrow.LargeListOfField(child(t.ElemField(), "element"))
	case *arrow.MapType:
		k, v := child(t.KeyField(), "key"), child(t.ItemField(), "value")
		mt := arrow.MapOfWithMetadata(k.Type, k.Metadata, v.Type, v.Metadata)
		mt.KeysSorted = t.KeysSorted
		if !v.Nullable {
			mt.SetItemNullable(false)
		}
		f.Type = mt
	}
	return f
}

// fileDefaults are the values the current schema's fields read as from
// data file pf where the file lacks them: the file's value of an identity
// partition of the field, in the spec the file was written with (null
// where that value is null), else the field's initial default. Top-level
// columns' are by name, nested fields' by field id.
func (t *Table) fileDefaults(pf *plannedFile) (top map[string]scalar.Scalar, nested map[int]scalar.Scalar, err error) {
	spec := t.meta.PartitionSpecByID(int(pf.SpecID))
	if spec == nil {
		return nil, nil, fmt.Errorf("%w: data file %s was written with partition spec %d, which the metadata lacks", formats.ErrCorrupt, pf.Path, pf.SpecID)
	}
	top, nested = t.defaults, t.nestedDefaults
	ownTop, ownNested := false, false
	for _, part := range spec.Fields() {
		if _, ok := part.Transform.(ice.IdentityTransform); !ok {
			continue
		}
		field, ok := t.schema.FindFieldByID(part.SourceID())
		if !ok {
			continue // dropped since: not read
		}
		typ := t.arrowByID[field.ID].Type
		sc, err := t.partitionScalar(pf, part, field, typ)
		if err != nil {
			return nil, nil, err
		}
		if slices.ContainsFunc(t.schema.Fields(), func(f ice.NestedField) bool { return f.ID == field.ID }) {
			if !ownTop {
				top, ownTop = maps.Clone(t.defaults), true
				if top == nil {
					top = map[string]scalar.Scalar{}
				}
			}
			top[field.Name] = sc
			continue
		}
		if !ownNested {
			nested, ownNested = maps.Clone(t.nestedDefaults), true
			if nested == nil {
				nested = map[int]scalar.Scalar{}
			}
		}
		nested[field.ID] = sc
	}
	return top, nested, nil
}

// arrowByID adds the Arrow fields of fs, at every depth, to out by their
// field ids.
func arrowByID(fs []arrow.Field, out map[int]arrow.Field) {
	for _, f := range fs {
		if id, ok := fieldID(f); ok {
			out[id] = f
		}
		if nt, ok := f.Type.(arrow.NestedType); ok {
			arrowByID(nt.Fields(), out)
		}
	}
}

// nestedDefaults are the initial defaults of the current schema's fields
// below its top-level columns (v3: a struct field added after a file was
// written reads as it in that file), by field id, as Arrow scalars.
func nestedDefaults(schema *ice.Schema, byID map[int]arrow.Field) (map[int]scalar.Scalar, error) {
	var out map[int]scalar.Scalar
	var walk func(fs []ice.NestedField) error
	walk = func(fs []ice.NestedField) error {
		for _, f := range fs {
			if f.InitialDefault != nil {
				sc, err := defaultScalar(f, byID[f.ID].Type)
				if err != nil {
					return fmt.Errorf("initial default of field %q (field id %d, %v): %w", f.Name, f.ID, f.InitialDefault, err)
				}
				if out == nil {
					out = map[int]scalar.Scalar{}
				}
				out[f.ID] = sc
			}
			if nt, ok := f.Type.(ice.NestedType); ok {
				if err := walk(nt.Fields()); err != nil {
					return err
				}
			}
		}
		return nil
	}
	for _, f := range schema.Fields() {
		if nt, ok := f.Type.(ice.NestedType); ok {
			if err := walk(nt.Fields()); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// partitionScalar is data file pf's value of identity partition field
// part, whose source is field, as a scalar of typ; a null scalar where the
// file's value is null or absent from its partition.
func (t *Table) partitionScalar(pf *plannedFile, part ice.PartitionField, field ice.NestedField, typ arrow.DataType) (scalar.Scalar, error) {
	for _, pv := range pf.Partition {
		if pv.FieldID != part.FieldID {
			continue
		}
		switch {
		case pv.Unread != "":
			return nil, fmt.Errorf("data file %s: column %q (field id %d) is read from the file's identity partition %q, whose value %s is not understood", pf.Path, field.Name, field.ID, part.Name, pv.Unread)
		case pv.Null:
			return scalar.MakeNullScalar(typ), nil
		}
		lit, err := ice.LiteralFromBytes(field.Type, pv.Value)
		if err == nil {
			var sc scalar.Scalar
			if sc, err = literalScalar(lit, typ); err == nil {
				return sc, nil
			}
		}
		return nil, fmt.Errorf("data file %s: column %q (field id %d) is read from the file's identity partition %q: %w", pf.Path, field.Name, field.ID, part.Name, err)
	}
	return scalar.MakeNullScalar(typ), nil
}

// fileProjection reads one data file's columns as the table's current
// ones: formats.File's Columns, Convert and Defaults for it.
type fileProjection struct {
	t        *Table
	defaults map[string]scalar.Scalar // top-level columns', by name
	consts   map[int]scalar.Scalar    // nested fields', by field id
}

// columns maps the table's current columns onto the file's (see mapByID),
// and refuses a required column that the file lacks and that has no value
// to read as.
func (p *fileProjection) columns(file *arrow.Schema) (map[string]string, error) {
	m, err := mapByID(p.t.schema, p.t.names, file)
	if err != nil {
		return nil, err
	}
	for _, f := range p.t.schema.Fields() {
		if _, ok := m[f.Name]; ok || !f.Required {
			continue
		}
		if sc, ok := p.defaults[f.Name]; ok && sc.IsValid() {
			continue
		}
		return nil, fmt.Errorf("required column %q (field id %d) is not in the file under that field id%s, and has no partition value or initial default to read as", f.Name, f.ID, p.t.byNames(file))
	}
	return m, nil
}

// byNames says, for an error, whether a file was matched by names.
func (t *Table) byNames(file *arrow.Schema) string {
	for _, f := range file.Fields() {
		if _, ok := fieldID(f); ok {
			return ""
		}
	}
	return " or under a name the table's name mapping gives it (the file carries no field ids)"
}

// convert is formats.File.Convert: a column of a file written without
// field ids is given the ids of the name mapping at every depth first, so
// that nested fields match by id as a file with ids does.
func (p *fileProjection) convert(file, want arrow.Field) (formats.Converter, error) {
	if _, ok := fieldID(file); !ok {
		if id, ok := fieldID(want); ok {
			file = withMappedIDs(file, mappedByID(p.t.names, id))
		}
	}
	return convertColumn(file, want, p.consts)
}
