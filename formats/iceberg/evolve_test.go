package iceberg

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	ice "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
)

func idField(name string, id string, t arrow.DataType) arrow.Field {
	return arrow.Field{Name: name, Type: t, Nullable: true, Metadata: arrow.NewMetadata([]string{fieldIDKey}, []string{id})}
}

// A nested column converts by field id on slices too (offsets kept): a
// renamed struct field, an added one (null), a dropped one, a promoted
// one, inside a list and a map's values.
func TestConvertSliced(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	fileElem := arrow.StructOf(idField("a", "2", arrow.PrimitiveTypes.Int32), idField("gone", "3", arrow.BinaryTypes.String), idField("f", "4", arrow.PrimitiveTypes.Float32))
	wantElem := arrow.StructOf(idField("f2", "4", arrow.PrimitiveTypes.Float64), idField("b", "2", arrow.PrimitiveTypes.Int64), idField("new", "9", arrow.BinaryTypes.String))
	cases := []struct {
		file, want arrow.DataType
		in, out    string
	}{
		{fileElem, wantElem,
			`[{"a":1,"gone":"x","f":1.5},null,{"a":3,"gone":"z","f":-2},{"a":null,"gone":null,"f":null}]`,
			`[{"f2":1.5,"b":1,"new":null},null,{"f2":-2,"b":3,"new":null},{"f2":null,"b":null,"new":null}]`},
		{arrow.ListOf(fileElem), arrow.ListOf(wantElem),
			`[[{"a":1,"gone":"x","f":1}],null,[],[{"a":2,"gone":"y","f":2},{"a":3,"gone":"z","f":3}]]`,
			`[[{"f2":1,"b":1,"new":null}],null,[],[{"f2":2,"b":2,"new":null},{"f2":3,"b":3,"new":null}]]`},
		{arrow.MapOf(arrow.BinaryTypes.String, fileElem), arrow.MapOf(arrow.BinaryTypes.String, wantElem),
			`[[{"key":"k","value":{"a":1,"gone":"x","f":1}}],null,[{"key":"m","value":null}],[]]`,
			`[[{"key":"k","value":{"f2":1,"b":1,"new":null}}],null,[{"key":"m","value":null}],[]]`},
	}
	for _, c := range cases {
		conv, err := convertColumn(arrow.Field{Name: "c", Type: c.file}, arrow.Field{Name: "c", Type: c.want}, nil)
		if err != nil || conv == nil {
			t.Fatalf("%s -> %s: %v", c.file, c.want, err)
		}
		in, _, err := array.FromJSON(mem, c.file, strings.NewReader(c.in))
		if err != nil {
			t.Fatal(err)
		}
		want, _, err := array.FromJSON(mem, c.want, strings.NewReader(c.out))
		if err != nil {
			t.Fatal(err)
		}
		for _, sl := range [][2]int64{{0, 4}, {1, 4}, {2, 3}} {
			part := array.NewSlice(in, sl[0], sl[1])
			got, err := conv(part, mem)
			part.Release()
			if err != nil {
				t.Fatal(err)
			}
			wantPart := array.NewSlice(want, sl[0], sl[1])
			if !arrow.TypeEqual(got.DataType(), c.want) || !array.Equal(got, wantPart) {
				gj, _ := json.Marshal(got)
				wj, _ := json.Marshal(wantPart)
				t.Errorf("%s slice %v: got %s, want %s", c.want, sl, gj, wj)
			}
			got.Release()
			wantPart.Release()
		}
		in.Release()
		want.Release()
	}
	if _, err := convertColumn(arrow.Field{Type: arrow.ListOf(arrow.BinaryTypes.String)}, arrow.Field{Type: arrow.StructOf()}, nil); err == nil {
		t.Error("a list read as a struct converted")
	}
	if _, err := convertColumn(arrow.Field{Type: arrow.ListOf(arrow.PrimitiveTypes.Int64)}, arrow.Field{Type: arrow.ListOf(arrow.PrimitiveTypes.Int32)}, nil); err == nil {
		t.Error("long narrowed to int")
	}
}

// Initial defaults as iceberg-go leaves them after reading metadata JSON
// (the spec's single-value forms) become scalars of the column's type.
func TestDefaultScalars(t *testing.T) {
	for _, c := range []struct {
		typ  ice.Type
		v    any
		want string
	}{
		{ice.PrimitiveTypes.Bool, true, "true"},
		{ice.PrimitiveTypes.Int32, float64(-7), "-7"},
		{ice.PrimitiveTypes.Int64, float64(1 << 40), "1099511627776"},
		{ice.PrimitiveTypes.Float64, 1.5, "1.5"},
		{ice.PrimitiveTypes.String, "hi", "hi"},
		{ice.PrimitiveTypes.Date, "2024-02-29", "2024-02-29"},
		{ice.DecimalTypeOf(9, 2), "12.34", "12.34"},
		{ice.PrimitiveTypes.Binary, "cafe", "\xca\xfe"},
	} {
		f := ice.NestedField{ID: 1, Name: "c", Type: c.typ, InitialDefault: c.v}
		as, err := table.TypeToArrowType(c.typ, false, false)
		if err != nil {
			t.Fatal(err)
		}
		sc, err := defaultScalar(f, as)
		if err != nil {
			t.Errorf("%s default %v: %v", c.typ, c.v, err)
			continue
		}
		if !arrow.TypeEqual(sc.DataType(), as) || sc.String() != c.want {
			t.Errorf("%s default %v: %s %s, want %s %s", c.typ, c.v, sc.DataType(), sc, as, c.want)
		}
	}
	for _, c := range []struct {
		typ ice.Type
		v   any
	}{
		{ice.PrimitiveTypes.Int32, 1.5},
		{ice.PrimitiveTypes.Int32, float64(1 << 40)},
		{ice.PrimitiveTypes.Date, "yesterday"},
		{ice.PrimitiveTypes.Binary, "not hex"},
		{ice.PrimitiveTypes.Int64, map[string]any{}},
	} {
		as, _ := table.TypeToArrowType(c.typ, false, false)
		if sc, err := defaultScalar(ice.NestedField{Name: "c", Type: c.typ, InitialDefault: c.v}, as); err == nil {
			t.Errorf("%s default %v read as %s", c.typ, c.v, sc)
		}
	}
}
