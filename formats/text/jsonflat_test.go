package text

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

var flatSchema = arrow.NewSchema([]arrow.Field{
	{Name: "a", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	{Name: "b", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	{Name: "c", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "d", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
}, nil)

// decodeFlat decodes one record with the flat decoder and with arrow-go's,
// returning each one's row (nil where it failed).
func decodeFlat(t testing.TB, rec []byte) (flat, ref []string) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	fj, _ := newFlatJSON(mem, flatSchema)
	defer func() {
		for _, c := range fj.cols {
			c.b.Release()
		}
	}()
	if err := fj.parse(rec); err == nil {
		fj.commit()
		arrs := make([]arrow.Array, len(fj.cols))
		for i, c := range fj.cols {
			arrs[i] = c.b.NewArray()
		}
		b := array.NewRecordBatch(flatSchema, arrs, 1)
		for _, a := range arrs {
			a.Release()
		}
		flat = rowsOf(b)[0]
		b.Release()
	}
	rb := array.NewRecordBuilder(mem, flatSchema)
	defer rb.Release()
	if err := oneObject(rec); err == nil {
		defer func() {
			if recover() != nil { // a panic left the builder half written
				ref = nil
			}
		}()
		if err := unmarshal(rb, rec); err == nil {
			b := rb.NewRecordBatch()
			ref = rowsOf(b)[0]
			b.Release()
		}
	}
	return flat, ref
}

func TestFlatJSON(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`{"a":1,"b":2.5,"c":"x","d":true}`, "1|2.5|x|true"},
		{`{"c":"\u00e9\n\"q\" \ud83d\ude00","zz":{"n":[1,{"m":"}"}]},"a":-3}`, "-3|NULL|é\n\"q\" 😀|NULL"},
		{` { } `, "NULL|NULL|NULL|NULL"},
		{`{"a":null,"b":1}`, "NULL|1|NULL|NULL"},
	} {
		flat, ref := decodeFlat(t, []byte(c.in))
		got := ""
		for i, v := range flat {
			if i > 0 {
				got += "|"
			}
			got += v
		}
		if got != c.want {
			t.Errorf("%s: got %q, want %q (arrow-go: %q)", c.in, got, c.want, ref)
		}
	}
	for _, bad := range []string{`{"a":1.5}`, `{"a":"1"}`, `{"c":1}`, `{"d":1}`, `{"a":1,"a":2}`, `{"a":1} {"a":2}`, `{"a":1`, `[1]`, `{"c":"x}`, `{"a":[1]}`} {
		if flat, _ := decodeFlat(t, []byte(bad)); flat != nil {
			t.Errorf("%s: decoded as %q, want an error", bad, flat)
		}
	}
}

// Where both decoders read a record, they read the same values.
func FuzzFlatJSON(f *testing.F) {
	for _, s := range []string{`{"a":1,"b":2.5,"c":"x","d":true}`, `{"c":"\u00e9\\"}`, `{"b":1e3,"x":[{}]}`, `{}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, rec []byte) {
		flat, ref := decodeFlat(t, rec)
		if flat == nil || ref == nil {
			return
		}
		for i := range flat {
			if flat[i] != ref[i] && !sameValue(flat[i], ref[i]) {
				t.Fatalf("%q: column %d: flat %q, arrow-go %q", rec, i, flat[i], ref[i])
			}
		}
	})
}
