package valuecheck

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/sluicedata/sluice/internal/testkit/orcwrite"
)

// Schema is the Arrow schema of cols, every field nullable.
func Schema(cols []Column) *arrow.Schema {
	fs := make([]arrow.Field, len(cols))
	for i, c := range cols {
		fs[i] = arrow.Field{Name: c.Name, Type: c.Type, Nullable: c.Name != "id"}
	}
	return arrow.NewSchema(fs, nil)
}

// EditFields is f with edit applied to every field below it, depth
// first, and to f: struct fields, list elements, map keys and values (a
// writer's names or metadata, such as field ids, for the same columns).
func EditFields(f arrow.Field, edit func(arrow.Field) arrow.Field) arrow.Field {
	switch t := f.Type.(type) {
	case *arrow.StructType:
		fs := t.Fields()
		for i := range fs {
			fs[i] = EditFields(fs[i], edit)
		}
		f.Type = arrow.StructOf(fs...)
	case *arrow.ListType:
		f.Type = arrow.ListOfField(EditFields(t.ElemField(), edit))
	case *arrow.MapType:
		k, v := EditFields(t.KeyField(), edit), EditFields(t.ItemField(), edit)
		f.Type = arrow.MapOfWithMetadata(k.Type, k.Metadata, v.Type, v.Metadata)
	}
	return edit(f)
}

// Record is the rows of ids [from, from+n) of cols.
func Record(mem memory.Allocator, cols []Column, from, n int64) arrow.RecordBatch {
	b := array.NewRecordBuilder(mem, Schema(cols))
	defer b.Release()
	for id := from; id < from+n; id++ {
		for i, c := range cols {
			appendValue(b.Field(i), c.Value(id))
		}
	}
	return b.NewRecordBatch()
}

// RecordOf is the rows of ids [from, from+n) as schema lays them out: its
// fields name columns of All, and their types may be any a column's values
// convert to (another writer's schema for the same columns, an Iceberg
// table's, say).
func RecordOf(mem memory.Allocator, schema *arrow.Schema, from, n int64) (arrow.RecordBatch, error) {
	cols := make([]Column, schema.NumFields())
	for i, f := range schema.Fields() {
		c, ok := ByName(f.Name)
		if !ok {
			return nil, fmt.Errorf("valuecheck: no column %q", f.Name)
		}
		cols[i] = c
	}
	b := array.NewRecordBuilder(mem, schema)
	defer b.Release()
	for id := from; id < from+n; id++ {
		for i, c := range cols {
			appendValue(b.Field(i), c.Value(id))
		}
	}
	return b.NewRecordBatch(), nil
}

func appendValue(b array.Builder, v any) {
	if v == nil {
		b.AppendNull()
		return
	}
	switch bb := b.(type) {
	case *array.Int8Builder:
		bb.Append(int8(v.(int64)))
	case *array.Int16Builder:
		bb.Append(int16(v.(int64)))
	case *array.Int32Builder:
		bb.Append(int32(v.(int64)))
	case *array.Int64Builder:
		bb.Append(v.(int64))
	case *array.Uint8Builder:
		bb.Append(uint8(v.(uint64)))
	case *array.Uint16Builder:
		bb.Append(uint16(v.(uint64)))
	case *array.Uint32Builder:
		bb.Append(uint32(v.(uint64)))
	case *array.Uint64Builder:
		bb.Append(v.(uint64))
	case *array.Float32Builder:
		bb.Append(v.(float32))
	case *array.Float64Builder:
		bb.Append(v.(float64))
	case *array.BooleanBuilder:
		bb.Append(v.(bool))
	case *array.StringBuilder:
		bb.Append(v.(string))
	case *array.BinaryBuilder:
		bb.Append(v.([]byte))
	case *array.BinaryDictionaryBuilder:
		if err := bb.AppendString(v.(string)); err != nil {
			panic(err)
		}
	case *array.Decimal128Builder:
		bb.Append(v.(decimal128.Num))
	case *array.Date32Builder:
		bb.Append(v.(arrow.Date32))
	case *array.TimestampBuilder:
		bb.Append(v.(arrow.Timestamp))
	case *array.MapBuilder:
		bb.Append(true)
		for _, kv := range v.([][2]any) {
			appendValue(bb.KeyBuilder(), kv[0])
			appendValue(bb.ItemBuilder(), kv[1])
		}
	case *array.ListBuilder:
		bb.Append(true)
		for _, e := range v.([]any) {
			appendValue(bb.ValueBuilder(), e)
		}
	case *array.StructBuilder:
		bb.Append(true)
		for i, f := range v.([]any) {
			appendValue(bb.FieldBuilder(i), f)
		}
	default:
		panic(fmt.Sprintf("valuecheck: no append for %T", b))
	}
}

// Parquet says how a Parquet file is written.
type Parquet struct {
	// RowGroupRows is the rows of a row group (default: the file's).
	RowGroupRows int64
	// PageIndex writes the offset and column indexes, and pages of about
	// 4 KiB so that row groups have several.
	PageIndex bool
	// SmallPages writes pages of about 4 KiB without a page index, as
	// pyarrow does by default but smaller: a read of part of a row group
	// then finds its pages by walking their headers.
	SmallPages bool
	// Plain turns dictionary encoding off.
	Plain bool
	// Codec compresses the pages (default none).
	Codec compress.Compression
}

// WriteParquet writes the rows of ids [from, from+n) of cols to path.
func WriteParquet(path string, cols []Column, from, n int64, o Parquet) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	props := []parquet.WriterProperty{
		parquet.WithMaxRowGroupLength(max(1, cmpOr(o.RowGroupRows, n))),
		parquet.WithCompression(o.Codec),
		parquet.WithDictionaryDefault(!o.Plain),
	}
	if o.PageIndex {
		props = append(props, parquet.WithPageIndexEnabled(true), parquet.WithDataPageSize(4<<10))
	} else if o.SmallPages {
		props = append(props, parquet.WithPageIndexEnabled(false), parquet.WithDataPageSize(4<<10))
	}
	mem := memory.NewGoAllocator()
	w, err := pqarrow.NewFileWriter(Schema(cols), f, parquet.NewWriterProperties(props...), pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema()))
	if err != nil {
		f.Close()
		return err
	}
	// Written a row group at a time, so that a row group is never split
	// across Write calls at another size than asked.
	step := cmpOr(o.RowGroupRows, n)
	for at := from; at < from+n; at += step {
		rec := Record(mem, cols, at, min(step, from+n-at))
		err := w.WriteBuffered(rec)
		rec.Release()
		if err != nil {
			w.Close()
			return err
		}
		if o.RowGroupRows > 0 {
			w.NewBufferedRowGroup()
		}
	}
	return w.Close()
}

func cmpOr(a, b int64) int64 {
	if a > 0 {
		return a
	}
	return b
}

// ORCStripes is the writer's options for zstd stripes of stripeRows rows
// with a row index entry every stride rows: what the option matrix writes,
// named here so that it needs no import of the writer.
func ORCStripes(stripeRows, stride int) orcwrite.Options {
	return orcwrite.Options{StripeRows: stripeRows, RowIndexStride: stride, Compression: orcwrite.Zstd}
}

// WriteORC writes the rows of ids [from, from+n) of cols to path. The
// writer takes columns of booleans, 32- and 64-bit integers, floats,
// strings, binaries and dates, and structs, lists and maps of them where
// o.RowIndexStride < 0.
func WriteORC(path string, cols []Column, from, n int64, o orcwrite.Options) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w, err := orcwrite.New(f, Schema(cols), o)
	if err != nil {
		f.Close()
		return err
	}
	mem := memory.NewGoAllocator()
	for at := from; at < from+n; at += 4096 {
		rec := Record(mem, cols, at, min(4096, from+n-at))
		err := w.Write(rec)
		rec.Release()
		if err != nil {
			f.Close()
			return err
		}
	}
	if err := w.Close(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// WriteArrow writes the rows of ids [from, from+n) of cols to path as an
// Arrow IPC file of batches of batchRows rows.
func WriteArrow(path string, cols []Column, from, n, batchRows int64) error {
	var sizes []int64
	for at := int64(0); at < n; at += batchRows {
		sizes = append(sizes, min(batchRows, n-at))
	}
	return WriteArrowBatches(path, cols, from, sizes)
}

// WriteArrowBatches writes consecutive ids from from to path as an Arrow
// IPC file of batches of the given sizes (empty ones too).
func WriteArrowBatches(path string, cols []Column, from int64, sizes []int64) error {
	var n int64
	for _, k := range sizes {
		n += k
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	mem := memory.NewGoAllocator()
	w, err := ipc.NewFileWriter(f, ipc.WithSchema(Schema(cols)), ipc.WithAllocator(mem))
	if err != nil {
		f.Close()
		return err
	}
	// One record sliced into batches: they share its dictionaries, as the
	// IPC file format requires.
	all := Record(mem, cols, from, n)
	defer all.Release()
	at := int64(0)
	for _, k := range sizes {
		rec := all.NewSlice(at, at+k)
		at += k
		err := w.Write(rec)
		rec.Release()
		if err != nil {
			w.Close()
			f.Close()
			return err
		}
	}
	if err := w.Close(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// TextColumns are the columns a CSV or JSON file carries as written: what a
// reader that infers types from text gets back value for value (int64
// integers, finite float64s, booleans, strings).
var TextColumns = []string{"id", "i32", "unit", "b", "text", "tag"}

// WriteCSV writes the rows of ids [from, from+n) of cols to path with a
// header (see CSV).
func WriteCSV(path string, cols []Column, from, n int64) error {
	return writeFile(path, func(w io.Writer) error { return CSV(w, cols, from, n, true) })
}

// WriteJSONL writes the rows of ids [from, from+n) of cols to path (see
// JSONLines).
func WriteJSONL(path string, cols []Column, from, n int64) error {
	return writeFile(path, func(w io.Writer) error { return JSONLines(w, cols, from, n) })
}

func writeFile(path string, write func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// CSV writes the rows of ids [from, from+n) of cols to w, after a header
// if header is set: strings quoted (so that an empty string is not a null),
// nulls as empty unquoted fields, floats in the shortest form that reads
// back exactly.
func CSV(out io.Writer, cols []Column, from, n int64, header bool) error {
	w := bufio.NewWriter(out)
	if header {
		for i, c := range cols {
			if i > 0 {
				w.WriteByte(',')
			}
			w.WriteString(c.Name)
		}
		w.WriteByte('\n')
	}
	for id := from; id < from+n; id++ {
		for i, c := range cols {
			if i > 0 {
				w.WriteByte(',')
			}
			v := c.Value(id)
			switch x := v.(type) {
			case nil:
			case string:
				w.WriteString(`"` + strings.ReplaceAll(x, `"`, `""`) + `"`)
			case int64:
				w.WriteString(strconv.FormatInt(x, 10))
			case float64:
				if math.IsNaN(x) || math.IsInf(x, 0) {
					return fmt.Errorf("valuecheck: column %s: %v has no CSV form here", c.Name, x)
				}
				w.WriteString(strconv.FormatFloat(x, 'g', -1, 64))
			case bool:
				w.WriteString(strconv.FormatBool(x))
			default:
				return fmt.Errorf("valuecheck: column %s: %T has no CSV form here", c.Name, v)
			}
		}
		w.WriteByte('\n')
	}
	return w.Flush()
}

// JSONLines writes the rows of ids [from, from+n) of cols to w, one object
// a line, nulls as JSON nulls, binaries in base64.
func JSONLines(out io.Writer, cols []Column, from, n int64) error {
	w := bufio.NewWriter(out)
	for id := from; id < from+n; id++ {
		w.WriteByte('{')
		for i, c := range cols {
			if i > 0 {
				w.WriteByte(',')
			}
			k, _ := json.Marshal(c.Name)
			w.Write(k)
			w.WriteByte(':')
			v := c.Value(id)
			if b, ok := v.([]byte); ok {
				v = base64.StdEncoding.EncodeToString(b)
			}
			if f, ok := v.(float64); ok && (math.IsNaN(f) || math.IsInf(f, 0)) {
				return fmt.Errorf("valuecheck: column %s: %v has no JSON form", c.Name, f)
			}
			j, err := json.Marshal(v)
			if err != nil {
				return err
			}
			w.Write(j)
		}
		w.WriteString("}\n")
	}
	return w.Flush()
}
