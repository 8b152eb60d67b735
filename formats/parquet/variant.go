package parquet

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/extensions"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/metadata"
	pqschema "github.com/apache/arrow-go/v18/parquet/schema"
)

// Some writers declare a VARIANT's metadata field optional, where the spec
// asks for a required one; arrow-go then refuses the whole file ("metadata
// field must be non-nullable binary type"), DuckDB reads it. For a
// top-level, unshredded VARIANT (a metadata and a value field, both binary)
// the driver has arrow-go read the group as a plain struct, without its
// annotation, and makes the VARIANT of the struct after decoding (see
// convVariant): the same buffers under a type whose metadata is not
// nullable. A row whose metadata is null where the variant is not fails
// the read, naming the row. Shredded variants (with typed_value) and
// variants inside other types are left to arrow-go.

// plainVariants returns md with the VARIANT annotation taken off the
// top-level columns described above, and their indices among the root's
// fields; md itself when there are none.
func plainVariants(md *metadata.FileMetaData) (*metadata.FileMetaData, map[int]bool, error) {
	root := md.Schema.Root()
	var plain map[int]bool
	nodes := make(pqschema.FieldList, root.NumFields())
	for i := range nodes {
		nodes[i] = root.Field(i)
		g, ok := nodes[i].(*pqschema.GroupNode)
		if !ok || !optionalVariantMetadata(g) {
			continue
		}
		fields := make(pqschema.FieldList, g.NumFields())
		for j := range fields {
			fields[j] = g.Field(j)
		}
		n, err := pqschema.NewGroupNode(g.Name(), g.RepetitionType(), fields, g.FieldID())
		if err != nil {
			return nil, nil, err
		}
		nodes[i] = n
		if plain == nil {
			plain = map[int]bool{}
		}
		plain[i] = true
	}
	if plain == nil {
		return md, nil, nil
	}
	alt, err := pqschema.NewGroupNode(root.Name(), root.RepetitionType(), nodes, root.FieldID())
	if err != nil {
		return nil, nil, err
	}
	out := *md
	out.Schema = pqschema.NewSchema(alt)
	return &out, plain, nil
}

// optionalVariantMetadata reports whether g is an unshredded VARIANT whose
// metadata field is optional.
func optionalVariantMetadata(g *pqschema.GroupNode) bool {
	if _, ok := g.LogicalType().(pqschema.VariantLogicalType); !ok || g.NumFields() != 2 {
		return false
	}
	md, ok := g.Field(0).(*pqschema.PrimitiveNode)
	if !ok || md.Name() != "metadata" || md.RepetitionType() != parquet.Repetitions.Optional || md.PhysicalType() != parquet.Types.ByteArray {
		return false
	}
	val, ok := g.Field(1).(*pqschema.PrimitiveNode)
	return ok && val.Name() == "value" && val.RepetitionType() != parquet.Repetitions.Repeated && val.PhysicalType() == parquet.Types.ByteArray
}

// variantsOf returns schema with the columns plainVariants read as plain
// structs typed VARIANT, and convs with their conversions.
func variantsOf(schema *arrow.Schema, plain map[int]bool, convs map[string]conversion) (*arrow.Schema, map[string]conversion, error) {
	if len(plain) == 0 {
		return schema, convs, nil
	}
	fields := schema.Fields()
	for i := range plain {
		st, ok := fields[i].Type.(*arrow.StructType)
		if !ok || st.NumFields() != 2 {
			return nil, nil, fmt.Errorf("column %q: VARIANT read as %s", fields[i].Name, fields[i].Type)
		}
		sf := st.Fields()
		sf[0].Nullable = false
		vt, err := extensions.NewVariantType(arrow.StructOf(sf...))
		if err != nil {
			return nil, nil, fmt.Errorf("column %q: %w", fields[i].Name, err)
		}
		fields[i].Type = vt
		if convs == nil {
			convs = map[string]conversion{}
		}
		convs[fields[i].Name] = conversion{kind: convVariant, to: vt}
	}
	meta := schema.Metadata()
	return arrow.NewSchema(fields, &meta), convs, nil
}

// toVariant makes the VARIANT of col, a struct of metadata and value, over
// the same buffers. first is the file row of col's first value, for errors.
func toVariant(col arrow.Array, vt *extensions.VariantType, first int64) (arrow.Array, error) {
	st, ok := col.(*array.Struct)
	if !ok || st.NumField() != 2 {
		return nil, fmt.Errorf("VARIANT decoded as %s", col.DataType())
	}
	md := st.Field(0)
	if md.NullN() > 0 {
		for i := range st.Len() {
			if st.IsValid(i) && md.IsNull(i) {
				return nil, fmt.Errorf("row %d: VARIANT value without metadata", first+int64(i))
			}
		}
	}
	d := st.Data()
	storage := array.NewData(vt.StorageType(), d.Len(), d.Buffers(), d.Children(), d.NullN(), d.Offset())
	defer storage.Release()
	arr := array.MakeFromData(storage)
	defer arr.Release()
	return array.NewExtensionArrayWithStorage(vt, arr), nil
}
