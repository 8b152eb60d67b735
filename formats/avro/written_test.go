package avro_test

import (
	"fmt"
	"math/big"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	twmb "github.com/twmb/avro"
	"github.com/twmb/avro/ocf"

	"github.com/sluicedata/sluice/formats"
	"github.com/sluicedata/sluice/formats/avro"
)

// everyType is a schema of every Avro type and logical type the driver
// reads, nullable and not, nested in records, arrays, maps and unions.
const everyType = `{"type": "record", "name": "every", "namespace": "sluice.test", "fields": [
	{"name": "id", "type": "long"},
	{"name": "b", "type": "boolean"},
	{"name": "i", "type": "int"},
	{"name": "f", "type": "float"},
	{"name": "d", "type": "double"},
	{"name": "by", "type": "bytes"},
	{"name": "s", "type": "string"},
	{"name": "n", "type": "null"},
	{"name": "ni", "type": ["null", "int"]},
	{"name": "sn", "type": ["string", "null"]},
	{"name": "e", "type": {"type": "enum", "name": "color", "symbols": ["RED", "GREEN", "BLUE"]}},
	{"name": "ne", "type": ["null", "color"]},
	{"name": "fx", "type": {"type": "fixed", "name": "four", "size": 4}},
	{"name": "dec", "type": {"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 3}},
	{"name": "decfx", "type": {"type": "fixed", "name": "d16", "size": 16, "logicalType": "decimal", "precision": 38, "scale": 5}},
	{"name": "dec256", "type": ["null", {"type": "fixed", "name": "d24", "size": 24, "logicalType": "decimal", "precision": 55, "scale": 10}]},
	{"name": "uuid", "type": {"type": "string", "logicalType": "uuid"}},
	{"name": "uuidfx", "type": ["null", {"type": "fixed", "name": "u16", "size": 16, "logicalType": "uuid"}]},
	{"name": "date", "type": {"type": "int", "logicalType": "date"}},
	{"name": "tms", "type": {"type": "int", "logicalType": "time-millis"}},
	{"name": "tus", "type": {"type": "long", "logicalType": "time-micros"}},
	{"name": "tsms", "type": {"type": "long", "logicalType": "timestamp-millis"}},
	{"name": "tsus", "type": ["null", {"type": "long", "logicalType": "timestamp-micros"}]},
	{"name": "tsns", "type": {"type": "long", "logicalType": "timestamp-nanos"}},
	{"name": "lts", "type": {"type": "long", "logicalType": "local-timestamp-micros"}},
	{"name": "dur", "type": {"type": "fixed", "name": "dur12", "size": 12, "logicalType": "duration"}},
	{"name": "rec", "type": {"type": "record", "name": "inner", "fields": [
		{"name": "x", "type": "int"},
		{"name": "y", "type": ["null", "string"]},
		{"name": "deep", "type": ["null", {"type": "record", "name": "deeper", "fields": [{"name": "z", "type": "double"}]}]}
	]}},
	{"name": "nrec", "type": ["null", "inner"]},
	{"name": "arr", "type": {"type": "array", "items": ["null", "long"]}},
	{"name": "arrec", "type": {"type": "array", "items": "deeper"}},
	{"name": "vf", "type": {"type": "array", "items": "float"}},
	{"name": "vd", "type": ["null", {"type": "array", "items": "double"}]},
	{"name": "vi", "type": {"type": "array", "items": "int"}},
	{"name": "vl", "type": {"type": "array", "items": "long"}},
	{"name": "m", "type": {"type": "map", "values": "string"}},
	{"name": "marr", "type": ["null", {"type": "map", "values": {"type": "array", "items": "int"}}]},
	{"name": "u3", "type": ["null", "int", "string"]},
	{"name": "u2", "type": ["long", "string", "four"]}
]}`

// everyRow is row id of everyType, in the Go values twmb/avro encodes.
func everyRow(rng *rand.Rand, id int64) map[string]any {
	maybe := func(v any) any {
		if rng.IntN(5) == 0 {
			return nil
		}
		return v
	}
	str := func() string {
		s := []string{"", "a", "héllo", "日本語", strings.Repeat("x", rng.IntN(40))}
		return s[rng.IntN(len(s))]
	}
	var arr []any
	for range rng.IntN(5) {
		arr = append(arr, maybe(rng.Int64()-rng.Int64()))
	}
	vec := func(f func() any) []any {
		out := []any{}
		for range rng.IntN(20) {
			out = append(out, f())
		}
		return out
	}
	vf := vec(func() any { return rng.Float32() })
	vd := maybe(vec(func() any { return rng.NormFloat64() }))
	vi := vec(func() any { return rng.Int32() - rng.Int32() })
	vl := vec(func() any { return rng.Int64() - rng.Int64() })
	var arrec []any
	for range rng.IntN(3) {
		arrec = append(arrec, map[string]any{"z": rng.NormFloat64()})
	}
	m := map[string]any{}
	for k := range rng.IntN(4) {
		m[fmt.Sprint("k", k)] = str()
	}
	var marr any
	if rng.IntN(3) > 0 {
		mm := map[string]any{}
		for k := range rng.IntN(3) {
			var l []any
			for range rng.IntN(3) {
				l = append(l, rng.Int32())
			}
			mm[fmt.Sprint(k)] = l
		}
		marr = mm
	}
	inner := func() map[string]any {
		var deep any
		if rng.IntN(2) == 0 {
			deep = map[string]any{"z": float64(id) / 3}
		}
		return map[string]any{"x": int32(id), "y": maybe(str()), "deep": deep}
	}
	var u3, u2 any
	switch rng.IntN(3) {
	case 1:
		u3 = rng.Int32()
	case 2:
		u3 = str()
	}
	switch rng.IntN(3) {
	case 0:
		u2 = rng.Int64()
	case 1:
		u2 = str()
	default:
		u2 = [4]byte{1, 2, 3, byte(id)}
	}
	big256, _ := new(big.Int).SetString(fmt.Sprintf("%d%040d", rng.Int64N(1e12), id), 10)
	if rng.IntN(2) == 0 {
		big256.Neg(big256)
	}
	colors := []string{"RED", "GREEN", "BLUE"}
	return map[string]any{
		"id": id, "b": rng.IntN(2) == 0, "i": rng.Int32() - rng.Int32(), "f": rng.Float32(), "d": rng.NormFloat64(),
		"by": []byte(str()), "s": str(), "n": nil, "ni": maybe(rng.Int32()), "sn": maybe(str()),
		"e": colors[rng.IntN(3)], "ne": maybe(colors[rng.IntN(3)]), "fx": [4]byte{byte(id), 2, 3, 4},
		"dec":    big.NewRat(rng.Int64N(2e11)-1e11, 1000),
		"decfx":  new(big.Rat).SetFrac(new(big.Int).Mul(big.NewInt(rng.Int64()-rng.Int64()), big.NewInt(1e15)), big.NewInt(1e5)),
		"dec256": maybe(new(big.Rat).SetFrac(big256, new(big.Int).Exp(big.NewInt(10), big.NewInt(10), nil))),
		"uuid":   fmt.Sprintf("%08x-0000-4000-8000-%012x", id, rng.Int64N(1<<40)),
		"uuidfx": maybe([16]byte{byte(id), byte(id >> 8), 0x40, 3: byte(rng.IntN(256)), 15: 0xee}),
		"date":   time.Unix(86400*(rng.Int64N(40000)-20000), 0).UTC(),
		"tms":    time.Duration(rng.Int64N(86400000)) * time.Millisecond,
		"tus":    time.Duration(rng.Int64N(86400000000)) * time.Microsecond,
		"tsms":   time.UnixMilli(rng.Int64N(4e12) - 1e12).UTC(),
		"tsus":   maybe(time.UnixMicro(rng.Int64N(4e15) - 1e15).UTC()),
		"tsns":   time.Unix(0, rng.Int64()-rng.Int64()/2).UTC(),
		"lts":    time.UnixMicro(rng.Int64N(4e15)).UTC(),
		"dur":    twmb.Duration{Months: rng.Uint32N(1000), Days: rng.Uint32N(1000), Milliseconds: rng.Uint32N(86400000)},
		"rec":    inner(), "nrec": maybe(inner()),
		"arr": arr, "arrec": arrec, "vf": vf, "vd": vd, "vi": vi, "vl": vl, "m": m, "marr": marr, "u3": u3, "u2": u2,
	}
}

var codecs = map[string]ocf.Codec{
	"null":      nil,
	"deflate":   ocf.DeflateCodec(6),
	"snappy":    ocf.SnappyCodec(),
	"zstandard": ocf.MustZstdCodec(nil, nil),
}

// TestEveryTypeEveryCodec writes files of every type with each codec in
// many blocks with twmb/avro's writer, and checks every value the driver
// reads against twmb/avro's own reading of the file, whole and in row
// ranges cut anywhere, in batches of every size.
func TestEveryTypeEveryCodec(t *testing.T) {
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(1, 2))
	const n = 2000
	rows := make([]map[string]any, n)
	for i := range rows {
		rows[i] = everyRow(rng, int64(i))
	}
	for name, codec := range codecs {
		t.Run(name, func(t *testing.T) {
			opts := []ocf.WriterOpt{ocf.WithBlockCount(97)}
			if codec != nil {
				opts = append(opts, ocf.WithCodec(codec))
			}
			path := writeOCF(t, dir, name+".avro", everyType, rows, opts...)
			want := reference(t, path)
			if len(want) != n {
				t.Fatalf("twmb/avro read %d rows of %d", len(want), n)
			}
			// Units of about 20 KiB: several blocks each.
			ds := plan(t, avro.Format{UnitBytes: 20 << 10}, formats.PlanOptions{}, path)
			fr := ds.Fragments[0]
			if fr.Rows != n || len(fr.Units) < 3 {
				t.Fatalf("planned %d rows in %d units, want %d rows in several", fr.Rows, len(fr.Units), n)
			}
			var sum int64
			for _, u := range fr.Units {
				sum += u.Rows
			}
			if sum != n {
				t.Fatalf("units count %d rows, want %d", sum, n)
			}
			sameRows(t, "whole", readRows(t, ds, 0, 0, n, 1000), want)
			for range 12 {
				lo := rng.Int64N(n)
				hi := lo + rng.Int64N(n-lo+1)
				sameRows(t, fmt.Sprintf("rows [%d, %d)", lo, hi), readRows(t, ds, 0, lo, hi, 1+rng.IntN(300)), want[lo:hi])
			}
		})
	}
}

// TestSchemaMapping pins the Arrow type each Avro type reads as.
func TestSchemaMapping(t *testing.T) {
	path := writeOCF(t, t.TempDir(), "one.avro", everyType, []map[string]any{everyRow(rand.New(rand.NewPCG(3, 4)), 1)})
	ds := plan(t, avro.Format{}, formats.PlanOptions{}, path)
	want := map[string]string{
		"id": "int64", "b": "bool", "i": "int32", "f": "float32", "d": "float64", "by": "binary", "s": "utf8", "n": "null",
		"ni": "int32", "sn": "utf8", "e": "utf8", "ne": "utf8", "fx": "fixed_size_binary[4]",
		"dec": "decimal(12, 3)", "decfx": "decimal(38, 5)", "dec256": "decimal256(55, 10)", "uuid": "utf8", "uuidfx": "extension<arrow.uuid>",
		"date": "date32", "tms": "time32[ms]", "tus": "time64[us]", "tsms": "timestamp[ms, tz=UTC]",
		"tsus": "timestamp[us, tz=UTC]", "tsns": "timestamp[ns, tz=UTC]", "lts": "timestamp[us]",
		"dur": "month_day_nano_interval",
		"rec": "struct<x: int32, y: utf8 nullable, deep: struct<z: float64> nullable>",
		"arr": "list<element: int64, nullable>", "m": "map<utf8, utf8, items_non_nullable>",
		"u3": "dense_union<null: type=null, nullable=0, int: type=int32=1, string: type=utf8=2>",
		"u2": "dense_union<long: type=int64=0, string: type=utf8=1, sluice.test.four: type=fixed_size_binary[4]=2>",
	}
	nullable := map[string]bool{"n": true, "ni": true, "sn": true, "ne": true, "dec256": true, "tsus": true, "nrec": true, "marr": true, "vd": true, "uuidfx": true}
	for _, f := range ds.Schema.Fields() {
		if w, ok := want[f.Name]; ok && f.Type.String() != w {
			t.Errorf("column %q reads as %s, want %s", f.Name, f.Type, w)
		}
		if f.Nullable != nullable[f.Name] && f.Type.ID() != arrow.DENSE_UNION {
			t.Errorf("column %q nullable %v, want %v", f.Name, f.Nullable, nullable[f.Name])
		}
	}
}

// TestFilesUnified: files whose schemas differ by widening (int in one,
// long in another; float and double) plan as one dataset of the wider
// types, each file's values widened.
func TestFilesUnified(t *testing.T) {
	dir := t.TempDir()
	a := writeOCF(t, dir, "a.avro", `{"type": "record", "name": "r", "fields": [{"name": "n", "type": "int"}, {"name": "f", "type": ["null", "float"]}, {"name": "only_a", "type": "string"}]}`,
		[]map[string]any{{"n": int32(-5), "f": float32(1.5), "only_a": "x"}, {"n": int32(7), "f": nil, "only_a": "y"}})
	b := writeOCF(t, dir, "b.avro", `{"type": "record", "name": "r", "fields": [{"name": "f", "type": "double"}, {"name": "n", "type": "long"}]}`,
		[]map[string]any{{"n": int64(1) << 40, "f": 0.25}})
	ds := plan(t, avro.Format{}, formats.PlanOptions{Columns: []string{"n", "f"}}, a, b)
	if got := ds.Schema.String(); !strings.Contains(got, "n: type=int64") || !strings.Contains(got, "f: type=float64, nullable") {
		t.Fatalf("unified schema %s", got)
	}
	got := append(readRows(t, ds, 0, 0, 2, 10), readRows(t, ds, 1, 0, 1, 10)...)
	want := []map[string]any{{"n": int64(-5), "f": 1.5}, {"n": int64(7), "f": nil}, {"n": int64(1) << 40, "f": 0.25}}
	sameRows(t, "unified", got, want)
}
