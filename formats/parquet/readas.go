package parquet

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/decimal256"
	"github.com/apache/arrow-go/v18/arrow/extensions"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/metadata"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	pqschema "github.com/apache/arrow-go/v18/parquet/schema"

	"github.com/sluicedata/sluice/formats/parquet/internal/flatdecode"
)

// INT96 says how INT96 timestamps (the legacy form of Impala, Hive and
// Spark) are read.
type INT96 int

const (
	// INT96Microseconds, the default, reads a top-level INT96 column as
	// timestamp[us, UTC], as Spark and DuckDB do: every year fits. A value
	// with digits below the microsecond fails the read, naming the file,
	// column and row, rather than losing them.
	INT96Microseconds INT96 = iota
	// INT96Nanoseconds reads INT96 as timestamp[ns, UTC], arrow-go's own
	// reading: values before 1677 or after 2262 fail the read.
	INT96Nanoseconds
)

// Some columns are decoded by arrow-go as another physical type than the
// file declares, where arrow-go cannot decode the declared one, and their
// values are converted back to the column's Arrow type after decoding:
//
//   - INT96 as FIXED_LEN_BYTE_ARRAY(12): arrow-go converts INT96 to
//     nanoseconds only, and refuses the years outside 1677-2262 that Spark
//     writes (parquet-testing's int96_from_spark.parquet).
//   - a BYTE_ARRAY DECIMAL as plain BYTE_ARRAY: arrow-go refuses an empty
//     value ("invalid BYTEARRAY length"), which parquet-java and DuckDB read
//     as 0 and some writers emit for zero.
//   - a FIXED_LEN_BYTE_ARRAY in DELTA_BYTE_ARRAY encoding as BYTE_ARRAY:
//     arrow-go has no decoder for that pair (it panics, "unimplemented
//     encoding type"), while DELTA_BYTE_ARRAY's bytes are the same for both
//     physical types, and arrow-go decodes the BYTE_ARRAY form.
//
// Only top-level columns are read so; the same types inside structs, lists
// and maps are left to arrow-go.

// convKind is how a column decoded as another type is converted back.
type convKind int

const (
	// convInt96: fixed_size_binary(12) to a timestamp in microseconds.
	convInt96 convKind = iota + 1
	// convDecimal: big-endian two's complement binary to a decimal.
	convDecimal
	// convFixed: binary to fixed_size_binary(width), or an extension over it.
	convFixed
	// convVariant: a struct of metadata and value to a VARIANT (see
	// plainVariants).
	convVariant
)

// conversion is how one top-level column is converted after decoding.
type conversion struct {
	kind convKind
	// to is the column's type in the file's Arrow schema.
	to arrow.DataType
	// width is the declared FIXED_LEN_BYTE_ARRAY length, which every value
	// decoded as BYTE_ARRAY must have; 0 for BYTE_ARRAY columns.
	width int
}

// readAs works out which top-level columns of md arrow-go is to decode as
// another physical type. It sets the types of those columns in schema (the
// file's Arrow schema, as arrow-go infers it from the declared types), and
// returns the metadata arrow-go is to read with (md itself when nothing is
// changed) and the conversions by column name.
func readAs(md *metadata.FileMetaData, manifest *pqarrow.SchemaManifest, schema *arrow.Schema, int96 INT96) (*metadata.FileMetaData, *arrow.Schema, map[string]conversion, error) {
	root := md.Schema.Root()
	fields := schema.Fields()
	var convs map[string]conversion
	replaced := map[int]pqschema.Node{} // by field of the root
	for i := range manifest.Fields {
		sf := &manifest.Fields[i]
		if !sf.IsLeaf() || i >= len(fields) || i >= root.NumFields() {
			continue
		}
		node, ok := root.Field(i).(*pqschema.PrimitiveNode)
		if !ok || node.Name() != fields[i].Name {
			continue
		}
		var (
			c    conversion
			phys parquet.Type
			size int32 = -1
		)
		switch t := fields[i].Type; node.PhysicalType() {
		case parquet.Types.Int96:
			ts, ok := t.(*arrow.TimestampType)
			if !ok || int96 == INT96Nanoseconds {
				continue
			}
			c = conversion{kind: convInt96, to: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: ts.TimeZone}}
			phys, size = parquet.Types.FixedLenByteArray, 12
			fields[i].Type = c.to
		case parquet.Types.ByteArray:
			if !isDecimal(t) {
				continue
			}
			c = conversion{kind: convDecimal, to: t}
			phys = parquet.Types.ByteArray
		case parquet.Types.FixedLenByteArray:
			if !deltaByteArrayOnly(md, sf.ColIndex) {
				continue
			}
			switch {
			case isDecimal(t):
				c = conversion{kind: convDecimal, to: t, width: node.TypeLength()}
			case fixedStorage(t) != nil && fixedStorage(t).ByteWidth == node.TypeLength():
				c = conversion{kind: convFixed, to: t, width: node.TypeLength()}
			default:
				continue // float16 and intervals are left to arrow-go
			}
			phys = parquet.Types.ByteArray
		default:
			continue
		}
		n, err := pqschema.NewPrimitiveNode(node.Name(), node.RepetitionType(), phys, node.FieldID(), size)
		if err != nil {
			return nil, nil, nil, err
		}
		replaced[i] = n
		if convs == nil {
			convs = map[string]conversion{}
		}
		convs[node.Name()] = c
	}
	if len(convs) == 0 {
		return md, schema, nil, nil
	}
	nodes := make(pqschema.FieldList, root.NumFields())
	for i := range nodes {
		if n, ok := replaced[i]; ok {
			nodes[i] = n
		} else {
			nodes[i] = root.Field(i)
		}
	}
	alt, err := pqschema.NewGroupNode(root.Name(), root.RepetitionType(), nodes, root.FieldID())
	// The new root adopted the unchanged nodes it shares with md's schema:
	// give them back. A column's path stops at the root either way.
	for i, n := range nodes {
		if _, ok := replaced[i]; !ok {
			n.SetParent(root)
		}
	}
	if err != nil {
		return nil, nil, nil, err
	}
	read := *md
	read.Schema = pqschema.NewSchema(alt)
	meta := schema.Metadata()
	return &read, arrow.NewSchema(fields, &meta), convs, nil
}

func isDecimal(t arrow.DataType) bool {
	switch t.ID() {
	case arrow.DECIMAL128, arrow.DECIMAL256:
		return true
	}
	return false
}

// fixedStorage is t's fixed_size_binary type, or that of the extension t is.
func fixedStorage(t arrow.DataType) *arrow.FixedSizeBinaryType {
	if ext, ok := t.(arrow.ExtensionType); ok {
		t = ext.StorageType()
	}
	fsb, _ := t.(*arrow.FixedSizeBinaryType)
	return fsb
}

// deltaByteArrayOnly reports whether every chunk of column col stores its
// values in DELTA_BYTE_ARRAY and in nothing else (RLE and BIT_PACKED are
// the levels'), so that arrow-go can decode all of its pages as BYTE_ARRAY.
func deltaByteArrayOnly(md *metadata.FileMetaData, col int) bool {
	any := false
	for rg := range md.NumRowGroups() {
		cc, err := md.RowGroup(rg).ColumnChunk(col)
		if err != nil {
			return false
		}
		for _, e := range cc.Encodings() {
			switch e {
			case parquet.Encodings.DeltaByteArray:
				any = true
			case parquet.Encodings.RLE, parquet.Encodings.BitPacked:
			default:
				return false
			}
		}
	}
	return any
}

// convert turns col, decoded as another type, into c.to. first is the file
// row of col's first value, for errors.
func (c conversion) convert(col arrow.Array, first int64, mem memory.Allocator) (arrow.Array, error) {
	switch c.kind {
	case convInt96:
		in, ok := col.(*array.FixedSizeBinary)
		if !ok || in.DataType().(*arrow.FixedSizeBinaryType).ByteWidth != 12 {
			return nil, fmt.Errorf("INT96 decoded as %s", col.DataType())
		}
		b := array.NewTimestampBuilder(mem, c.to.(*arrow.TimestampType))
		defer b.Release()
		b.Reserve(in.Len())
		for i := range in.Len() {
			if in.IsNull(i) {
				b.AppendNull()
				continue
			}
			us, err := int96Micros(in.Value(i))
			if err != nil {
				return nil, fmt.Errorf("row %d: %w", first+int64(i), err)
			}
			b.Append(arrow.Timestamp(us))
		}
		return b.NewArray(), nil
	case convVariant:
		return toVariant(col, c.to.(*extensions.VariantType), first)
	case convDecimal, convFixed:
		in, ok := col.(*array.Binary)
		if !ok {
			return nil, fmt.Errorf("decoded as %s", col.DataType())
		}
		var b array.Builder
		var appendValue func(v []byte) error
		switch t := c.to.(type) {
		case *arrow.Decimal128Type:
			db := array.NewDecimal128Builder(mem, t)
			b, appendValue = db, func(v []byte) error {
				n, err := decimal128FromBytes(v)
				db.Append(n)
				return err
			}
		case *arrow.Decimal256Type:
			db := array.NewDecimal256Builder(mem, t)
			b, appendValue = db, func(v []byte) error {
				n, err := decimal256FromBytes(v)
				db.Append(n)
				return err
			}
		default:
			fsb := fixedStorage(c.to)
			if fsb == nil {
				return nil, fmt.Errorf("cannot read %s from binary", c.to)
			}
			fb := array.NewFixedSizeBinaryBuilder(mem, fsb)
			b, appendValue = fb, func(v []byte) error {
				fb.Append(v)
				return nil
			}
		}
		defer b.Release()
		b.Reserve(in.Len())
		for i := range in.Len() {
			if in.IsNull(i) {
				b.AppendNull()
				continue
			}
			v := in.Value(i)
			if c.width > 0 && len(v) != c.width {
				return nil, fmt.Errorf("row %d: a value of %d bytes in a FIXED_LEN_BYTE_ARRAY(%d) column", first+int64(i), len(v), c.width)
			}
			if err := appendValue(v); err != nil {
				return nil, fmt.Errorf("row %d: %w", first+int64(i), err)
			}
		}
		out := b.NewArray()
		if ext, ok := c.to.(arrow.ExtensionType); ok {
			defer out.Release()
			return array.NewExtensionArrayWithStorage(ext, out), nil
		}
		return out, nil
	}
	return nil, fmt.Errorf("unknown conversion %d", c.kind)
}

// julianEpoch is the Julian day number of 1970-01-01, INT96's epoch.
const julianEpoch = 2440588

const dayMicros = 86400 * 1000 * 1000

// errSubMicro marks an INT96 value with digits below the microsecond.
var errSubMicro = errors.New("the INT96 timestamp has digits below the microsecond, which timestamp[us] cannot hold: read INT96 as nanoseconds (parquet.Format{INT96: parquet.INT96Nanoseconds}; sluice cat --int96 ns)")

// int96Micros converts an INT96 timestamp (nanoseconds into the day, then
// the Julian day, both signed, little-endian) to microseconds since
// 1970-01-01, in int64 arithmetic that wraps as Spark's does: Spark writes
// a timestamp past about year 292000 of the Julian calendar's count as a
// negative day and negative nanoseconds (int96_from_spark.parquet, whose
// README gives the microseconds), and reads them back with this arithmetic.
// Every value within int64 microseconds of 1970 that Impala, Hive or Spark
// writes reads as they read it.
func int96Micros(v []byte) (int64, error) {
	nanos := int64(binary.LittleEndian.Uint64(v))
	day := int64(int32(binary.LittleEndian.Uint32(v[8:])))
	if nanos%1000 != 0 {
		return 0, errSubMicro
	}
	return day*dayMicros + nanos/1000 - julianEpoch*dayMicros, nil
}

// decimal128FromBytes reads a big-endian two's complement integer of any
// length; an empty value is 0, as parquet-java and DuckDB read it.
func decimal128FromBytes(v []byte) (decimal128.Num, error) {
	w, err := twosComplement(v, 2)
	if err != nil {
		return decimal128.Num{}, err
	}
	return decimal128.New(int64(w[1]), w[0]), nil
}

func decimal256FromBytes(v []byte) (decimal256.Num, error) {
	w, err := twosComplement(v, 4)
	if err != nil {
		return decimal256.Num{}, err
	}
	return decimal256.New(w[3], w[2], w[1], w[0]), nil
}

// twosComplement reads v, big-endian two's complement, into words 64-bit
// words, least significant first, and fails if it does not fit.
func twosComplement(v []byte, words int) ([4]uint64, error) {
	var w [4]uint64
	if len(v) == 0 {
		return w, nil
	}
	fill := byte(0)
	if v[0]&0x80 != 0 {
		fill = 0xff
	}
	size := 8 * words
	if len(v) > size {
		// Longer values fit if what is cut off only repeats the sign.
		extra := v[:len(v)-size]
		v = v[len(v)-size:]
		for _, x := range extra {
			if x != fill {
				return w, fmt.Errorf("a DECIMAL of %d bytes does not fit in %d bits", len(extra)+size, 8*size)
			}
		}
		if v[0]&0x80 != fill&0x80 {
			return w, fmt.Errorf("a DECIMAL of %d bytes does not fit in %d bits", len(extra)+size, 8*size)
		}
	}
	var buf [32]byte
	for i := range size - len(v) {
		buf[i] = fill
	}
	copy(buf[size-len(v):size], v)
	for i := range words {
		w[i] = binary.BigEndian.Uint64(buf[size-8*(i+1):])
	}
	return w, nil
}

// fixedDelta finds the FIXED_LEN_BYTE_ARRAY columns with pages in
// DELTA_BYTE_ARRAY encoding that readAs does not hand to arrow-go as
// BYTE_ARRAY: arrow-go v18 has no DELTA_BYTE_ARRAY decoder for
// FIXED_LEN_BYTE_ARRAY (its decoder switch panics, "unimplemented encoding
// type"). Those flatdecode reads (own: a top-level column, not repeated,
// of fixed_size_binary or UUID, in codecs it reads, such as chunks that
// fall back from a dictionary to DELTA_BYTE_ARRAY, as parquet-mr's v2
// writer does) it returns by leaf, for Read to keep from arrow-go; any
// other it refuses, where the read would otherwise fail at the first such
// page as corrupt values: one inside a struct, list or map, FLOAT16 or
// INTERVAL, or any where own is false (Format.ArrowGoDecode).
func fixedDelta(md *metadata.FileMetaData, manifest *pqarrow.SchemaManifest, schema *arrow.Schema, convs map[string]conversion, own bool) (map[int]bool, error) {
	var ownOnly map[int]bool
	for c := range md.Schema.NumColumns() {
		col := md.Schema.Column(c)
		if col.PhysicalType() != parquet.Types.FixedLenByteArray {
			continue
		}
		path := col.ColumnPath()
		if conv, ok := convs[path[0]]; ok && len(path) == 1 && conv.width > 0 {
			continue
		}
		delta, known := false, true
		for rg := range md.NumRowGroups() {
			cc, err := md.RowGroup(rg).ColumnChunk(c)
			if err != nil {
				return nil, err
			}
			delta = delta || slices.Contains(cc.Encodings(), parquet.Encodings.DeltaByteArray)
			known = known && flatdecode.Codec(cc.Compression()).Known()
		}
		if !delta {
			continue
		}
		if own && known && col.MaxRepetitionLevel() == 0 && col.MaxDefinitionLevel() <= 1 {
			if t := topLevelType(manifest, schema, c); t != nil && flatdecode.Supports(flatdecode.FixedLenByteArray, t) && fixedStorage(t).ByteWidth == col.TypeLength() {
				if ownOnly == nil {
					ownOnly = map[int]bool{}
				}
				ownOnly[c] = true
				continue
			}
		}
		return nil, fmt.Errorf("column %q is FIXED_LEN_BYTE_ARRAY(%d) in DELTA_BYTE_ARRAY encoding, which arrow-go cannot decode (it has no DELTA_BYTE_ARRAY decoder for FIXED_LEN_BYTE_ARRAY); sluice reads such a column only at the top level, as binary, UUID or (with every page in that encoding) DECIMAL, and with its own decoder (not parquet.Format{ArrowGoDecode: true})", path.String(), col.TypeLength())
	}
	return ownOnly, nil
}

// topLevelType is the Arrow type of leaf c where it is a top-level column
// of schema (the file's, as manifest maps it), or nil.
func topLevelType(manifest *pqarrow.SchemaManifest, schema *arrow.Schema, c int) arrow.DataType {
	for i := range manifest.Fields {
		if sf := &manifest.Fields[i]; sf.IsLeaf() && sf.ColIndex == c && i < schema.NumFields() {
			return schema.Field(i).Type
		}
	}
	return nil
}
