// Command gen writes the Python tests' datasets and, for each, the values
// the Go API streams from it, so that the tests compare what Python
// receives with what a Go user would. It lives in testdata so that
// ./... never builds it; the tests build it by path.
//
//	gen DIR
//
// writes DIR/numbers (exampledata: id, label, x, s), DIR/numbers_avro
// (the rows of numbers in two Avro files, deflate, blocks of 500 rows),
// DIR/types (one file
// with a column of each type the Go side hands out), DIR/unions (Avro
// unions of several types; see writeUnions) and DIR/types.json
// (its rows as stream.Batches delivers them, shuffled with seed 7 in
// batches of 100, 4 splits), and DIR/catalog.db, a SQLite Iceberg catalog
// whose table ns.events holds the rows of DIR/other less its lowest ids
// (DIR/iceberg.json describes it).
//
//	gen serve DIR
//
// copies DIR/numbers to the object stores the environment names and
// deletes the copies when its standard input closes (see serve).
package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	twmb "github.com/twmb/avro"
	"github.com/twmb/avro/ocf"

	"github.com/sluicedata/sluice/examples/exampledata"
	"github.com/sluicedata/sluice/stream"
)

func main() {
	do := run
	switch {
	case len(os.Args) == 3 && os.Args[1] == "serve":
		do = serve
	case len(os.Args) != 2:
		fmt.Fprintln(os.Stderr, "usage: gen DIR | gen serve DIR")
		os.Exit(2)
	}
	if err := do(os.Args[len(os.Args)-1]); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

func run(dir string) error {
	if err := exampledata.Write(filepath.Join(dir, "numbers"), exampledata.Spec{Files: 4, RowsPerFile: 5000, RowGroupRows: 500, Seed: 1}); err != nil {
		return err
	}
	if err := exampledata.Write(filepath.Join(dir, "other"), exampledata.Spec{Files: 2, RowsPerFile: 3000, RowGroupRows: 500, Seed: 2}); err != nil {
		return err
	}
	if err := writeAvro(filepath.Join(dir, "numbers"), filepath.Join(dir, "numbers_avro")); err != nil {
		return err
	}
	if err := writeTypes(filepath.Join(dir, "types")); err != nil {
		return err
	}
	if err := writeUnions(filepath.Join(dir, "unions")); err != nil {
		return err
	}
	if err := writeIceberg(dir); err != nil {
		return err
	}
	return dumpTypes(dir)
}

// numbersAvroSchema is exampledata's schema in Avro.
const numbersAvroSchema = `{"type": "record", "name": "numbers", "fields": [
	{"name": "id", "type": "long"}, {"name": "label", "type": "long"},
	{"name": "x", "type": "double"}, {"name": "s", "type": "string"}]}`

// writeAvro writes the rows of the Parquet dataset src, in its order, as two
// Avro files under dst (written by twmb/avro, not by sluice).
func writeAvro(src, dst string) error {
	ctx := context.Background()
	d, err := stream.Open(ctx, stream.Options{URLs: []string{src}, BatchSize: 1000})
	if err != nil {
		return err
	}
	defer d.Close()
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	var rows []map[string]any
	for rec, err := range d.Batches(ctx) {
		if err != nil {
			return err
		}
		id, label := rec.Column(0).(*array.Int64), rec.Column(1).(*array.Int64)
		x, s := rec.Column(2).(*array.Float64), rec.Column(3).(*array.String)
		for r := range int(rec.NumRows()) {
			rows = append(rows, map[string]any{"id": id.Value(r), "label": label.Value(r), "x": x.Value(r), "s": s.Value(r)})
		}
	}
	half := len(rows) / 2
	for i, part := range [][]map[string]any{rows[:half], rows[half:]} {
		if err := writeOCF(filepath.Join(dst, fmt.Sprintf("part-%05d.avro", i)), numbersAvroSchema, part); err != nil {
			return err
		}
	}
	return nil
}

// unionsAvroSchema has unions of several types (dense unions in Arrow),
// one with a null branch, and a duration.
const unionsAvroSchema = `{"type": "record", "name": "unions", "fields": [
	{"name": "id", "type": "long"}, {"name": "u", "type": ["null", "int", "string"]},
	{"name": "v", "type": ["long", "string"]},
	{"name": "dur", "type": {"type": "fixed", "name": "dur12", "size": 12, "logicalType": "duration"}},
	{"name": "lu", "type": {"type": "array", "items": ["int", "string"]}},
	{"name": "ru", "type": {"type": "record", "name": "inner", "fields": [{"name": "x", "type": ["long", "string"]}]}}]}`

// writeUnions writes 5,000 rows of unionsAvroSchema, in blocks of 500,
// each a function of its id: u null where id % 3 is 0, the int id where 1,
// the string "s" + id else; v the string "x" where id % 4 is 0, else id * 3;
// dur (an Avro duration: month_day_nano_interval in Arrow) id % 12 months,
// id % 31 days and id * 1001 milliseconds; lu a list of unions, the first
// id % 3 of [id, "q"]; ru a record holding v again (a union in a struct).
func writeUnions(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	rows := make([]map[string]any, 5000)
	for i := range rows {
		var u any
		switch i % 3 {
		case 1:
			u = map[string]any{"int": int32(i)}
		case 2:
			u = map[string]any{"string": fmt.Sprintf("s%d", i)}
		}
		var v any = map[string]any{"long": int64(i) * 3}
		if i%4 == 0 {
			v = map[string]any{"string": "x"}
		}
		dur := make([]byte, 12) // months, days, milliseconds
		binary.LittleEndian.PutUint32(dur, uint32(i%12))
		binary.LittleEndian.PutUint32(dur[4:], uint32(i%31))
		binary.LittleEndian.PutUint32(dur[8:], uint32(i*1001))
		lu := []any{map[string]any{"int": int32(i)}, map[string]any{"string": "q"}}[:i%3]
		rows[i] = map[string]any{"id": int64(i), "u": u, "v": v, "dur": dur, "lu": lu, "ru": map[string]any{"x": v}}
	}
	return writeOCF(filepath.Join(dir, "part-00000.avro"), unionsAvroSchema, rows)
}

func writeOCF(path, schema string, rows []map[string]any) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	w, err := ocf.NewWriter(f, twmb.MustParse(schema), ocf.WithCodec(ocf.DeflateCodec(-1)), ocf.WithBlockCount(500))
	if err != nil {
		return err
	}
	for _, r := range rows {
		if err := w.Encode(r); err != nil {
			return err
		}
	}
	if err := w.Close(); err != nil {
		return err
	}
	return f.Close()
}

const typesRows = 1000

var typesSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "i8", Type: arrow.PrimitiveTypes.Int8},
	{Name: "i16", Type: arrow.PrimitiveTypes.Int16},
	{Name: "i32", Type: arrow.PrimitiveTypes.Int32},
	{Name: "u32", Type: arrow.PrimitiveTypes.Uint32},
	{Name: "f32", Type: arrow.PrimitiveTypes.Float32},
	{Name: "f64", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	{Name: "b", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
	{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "n", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, Nullable: true},
	{Name: "d", Type: arrow.FixedWidthTypes.Date32},
	{Name: "l", Type: arrow.ListOf(arrow.PrimitiveTypes.Int64), Nullable: true},
	{Name: "st", Type: arrow.StructOf(
		arrow.Field{Name: "a", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		arrow.Field{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true}), Nullable: true},
	{Name: "fb", Type: &arrow.FixedSizeBinaryType{ByteWidth: 4}, Nullable: true},
	{Name: "mp", Type: arrow.MapOf(arrow.BinaryTypes.String, arrow.PrimitiveTypes.Int64), Nullable: true},
	{Name: "dec", Type: &arrow.Decimal128Type{Precision: 38, Scale: 10}, Nullable: true},
	{Name: "lst", Type: arrow.ListOf(arrow.StructOf(arrow.Field{Name: "a", Type: arrow.PrimitiveTypes.Int64, Nullable: true})), Nullable: true},
	{Name: "ln", Type: arrow.ListOf(arrow.PrimitiveTypes.Int32), Nullable: true},
}, nil)

// writeTypes writes one file whose every value is a function of its row id.
func writeTypes(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, typesSchema)
	defer b.Release()
	for i := range typesRows {
		b.Field(0).(*array.Int64Builder).Append(int64(i))
		b.Field(1).(*array.Int8Builder).Append(int8(i % 256))
		b.Field(2).(*array.Int16Builder).Append(int16(i*37 - 5000))
		b.Field(3).(*array.Int32Builder).Append(int32(i * 100003))
		b.Field(4).(*array.Uint32Builder).Append(uint32(4000000000 - i))
		b.Field(5).(*array.Float32Builder).Append(float32(i) / 8)
		switch i % 7 {
		case 0:
			b.Field(6).(*array.Float64Builder).Append(math.NaN())
		case 3:
			b.Field(6).AppendNull()
		default:
			b.Field(6).(*array.Float64Builder).Append(float64(i) * -1.5)
		}
		if i%5 == 0 {
			b.Field(7).AppendNull()
		} else {
			b.Field(7).(*array.BooleanBuilder).Append(i%3 == 0)
		}
		if i%4 == 0 {
			b.Field(8).AppendNull()
		} else {
			b.Field(8).(*array.StringBuilder).Append(fmt.Sprintf("row %d é", i))
		}
		if i%2 == 0 {
			b.Field(9).AppendNull()
		} else {
			b.Field(9).(*array.Int64Builder).Append(int64(i) << 33)
		}
		if i%9 == 0 {
			b.Field(10).AppendNull()
		} else {
			b.Field(10).(*array.TimestampBuilder).Append(arrow.Timestamp(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro() + int64(i)*1_000_001))
		}
		b.Field(11).(*array.Date32Builder).Append(arrow.Date32(19000 + i))
		lb := b.Field(12).(*array.ListBuilder)
		if i%6 == 0 {
			lb.AppendNull()
		} else {
			lb.Append(true)
			for k := range i % 4 {
				lb.ValueBuilder().(*array.Int64Builder).Append(int64(i*10 + k))
			}
		}
		st := b.Field(13).(*array.StructBuilder)
		if i%11 == 0 {
			st.AppendNull()
		} else {
			st.Append(true)
			if i%3 == 0 {
				st.FieldBuilder(0).AppendNull()
			} else {
				st.FieldBuilder(0).(*array.Int64Builder).Append(int64(i) * -7)
			}
			st.FieldBuilder(1).(*array.StringBuilder).Append(fmt.Sprintf("in %d", i))
		}
		if i%13 == 0 {
			b.Field(14).AppendNull()
		} else {
			b.Field(14).(*array.FixedSizeBinaryBuilder).Append([]byte{byte(i), byte(i >> 8), 0xfe, byte(i % 7)})
		}
		mb := b.Field(15).(*array.MapBuilder)
		if i%17 == 0 {
			mb.AppendNull()
		} else {
			mb.Append(true)
			for k := range i % 3 {
				mb.KeyBuilder().(*array.StringBuilder).Append(fmt.Sprintf("k%d", k))
				if (i+k)%4 == 0 {
					mb.ItemBuilder().AppendNull()
				} else {
					mb.ItemBuilder().(*array.Int64Builder).Append(int64(i*100 + k))
				}
			}
		}
		if i%10 == 4 {
			b.Field(16).AppendNull()
		} else {
			// 38 digits: more than Python's default decimal context holds.
			v, _ := decimal128.FromString(fmt.Sprintf("%d1234567890123456.%010d", 1000000000+i*7919, i*104729), 38, 10)
			if i%2 == 1 {
				v = v.Negate()
			}
			b.Field(16).(*array.Decimal128Builder).Append(v)
		}
		ls := b.Field(17).(*array.ListBuilder)
		if i%8 == 0 {
			ls.AppendNull()
		} else {
			ls.Append(true)
			sb := ls.ValueBuilder().(*array.StructBuilder)
			for k := range i % 3 {
				if (i+k)%5 == 0 {
					sb.AppendNull()
				} else {
					sb.Append(true)
					sb.FieldBuilder(0).(*array.Int64Builder).Append(int64(i + k))
				}
			}
		}
		ln := b.Field(18).(*array.ListBuilder)
		ln.Append(true)
		for k := range 3 {
			if (i+k)%4 == 0 {
				ln.ValueBuilder().AppendNull()
			} else {
				ln.ValueBuilder().(*array.Int32Builder).Append(int32(i*3 + k))
			}
		}
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	f, err := os.Create(filepath.Join(dir, "part-00000.parquet"))
	if err != nil {
		return err
	}
	w, err := pqarrow.NewFileWriter(typesSchema, f, parquet.NewWriterProperties(parquet.WithMaxRowGroupLength(128)), pqarrow.DefaultWriterProps())
	if err != nil {
		f.Close()
		return err
	}
	if err := w.Write(rec); err != nil {
		w.Close()
		return err
	}
	return w.Close()
}

// dumpTypes streams the types dataset with the Go API and writes its rows
// as JSON: NaN as "NaN", timestamps and dates as their integers.
func dumpTypes(dir string) error {
	ctx := context.Background()
	d, err := stream.Open(ctx, stream.Options{URLs: []string{filepath.Join(dir, "types")}, BatchSize: 100, Shuffle: true, Seed: 7, NumSplits: 4})
	if err != nil {
		return err
	}
	defer d.Close()
	var rows []map[string]any
	for rec, err := range d.Batches(ctx) {
		if err != nil {
			return err
		}
		for r := range int(rec.NumRows()) {
			row := map[string]any{}
			for c, f := range rec.Schema().Fields() {
				row[f.Name] = value(rec.Column(c), r)
			}
			rows = append(rows, row)
		}
	}
	out, err := json.Marshal(rows)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "types.json"), out, 0o644)
}

func value(a arrow.Array, r int) any {
	if a.IsNull(r) {
		return nil
	}
	switch a := a.(type) {
	case *array.Float64:
		if v := a.Value(r); math.IsNaN(v) {
			return "NaN"
		}
		return a.Value(r)
	case *array.Float32:
		return a.Value(r)
	case *array.Timestamp:
		return int64(a.Value(r))
	case *array.Date32:
		return int64(a.Value(r))
	case *array.Struct:
		fields := map[string]any{}
		for k, f := range a.DataType().(*arrow.StructType).Fields() {
			fields[f.Name] = value(a.Field(k), r)
		}
		return fields
	case *array.Decimal128:
		return a.ValueStr(r)
	case *array.Map:
		lo, hi := a.ValueOffsets(r)
		pairs := make([]any, 0, hi-lo)
		for k := lo; k < hi; k++ {
			pairs = append(pairs, []any{value(a.Keys(), int(k)), value(a.Items(), int(k))})
		}
		return pairs
	case *array.List:
		lo, hi := a.ValueOffsets(r)
		vals := make([]any, 0, hi-lo)
		for k := lo; k < hi; k++ {
			vals = append(vals, value(a.ListValues(), int(k)))
		}
		return vals
	default:
		return a.GetOneForMarshal(r)
	}
}
