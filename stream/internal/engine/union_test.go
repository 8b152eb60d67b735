package engine

import (
	"fmt"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// TestConcatDenseUnion: dense unions cut from larger arrays (each keeping
// its whole members), empty ones, ones that use one member only, and
// nulls in a member join into one array of the same rows, holding only the
// member values their rows point to.
func TestConcatDenseUnion(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	dt := arrow.DenseUnionOf([]arrow.Field{
		{Name: "i", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
	}, []arrow.UnionTypeCode{3, 7})
	build := func(n, seed int, onlyInts bool) *array.DenseUnion {
		b := array.NewDenseUnionBuilder(mem, dt)
		defer b.Release()
		ints, strs := b.Child(0).(*array.Int64Builder), b.Child(1).(*array.StringBuilder)
		for r := range n {
			switch {
			case onlyInts || (r+seed)%3 != 0:
				b.Append(3)
				if (r+seed)%5 == 0 {
					ints.AppendNull()
				} else {
					ints.Append(int64(seed*1000 + r))
				}
			default:
				b.Append(7)
				strs.Append(fmt.Sprintf("v%d.%d", seed, r))
			}
		}
		return b.NewDenseUnionArray()
	}
	a, c := build(40, 1, false), build(9, 2, true)
	defer a.Release()
	defer c.Release()
	got := joinsCuts(t, mem, []piece{{a, 5, 17}, {a, 17, 17}, {c, 2, 9}, {a, 0, 3}, {a, 30, 40}, {c, 0, 1}})
	defer got.Release()
	want := got.Len()
	u := got.(*array.DenseUnion)
	if n := u.Field(0).Len() + u.Field(1).Len(); n != want {
		t.Errorf("members hold %d values for %d rows: more than the rows point to", n, want)
	}
}

// piece is rows lo to hi of src.
type piece struct {
	src    arrow.Array
	lo, hi int64
}

// joinsCuts concatenates the cuts and checks that the result holds their
// rows in order (as arrow-go prints them); the caller releases it.
func joinsCuts(t *testing.T, mem memory.Allocator, cuts []piece) arrow.Array {
	t.Helper()
	var parts []arrow.Array
	var want []string
	for _, k := range cuts {
		p := array.NewSlice(k.src, k.lo, k.hi)
		defer p.Release()
		parts = append(parts, p)
		for r := range p.Len() {
			want = append(want, p.ValueStr(r))
		}
	}
	got, err := concatenate(parts, mem)
	if err != nil {
		t.Fatal(err)
	}
	if got.Len() != len(want) {
		t.Fatalf("%d rows, want %d", got.Len(), len(want))
	}
	for r := range want {
		if s := got.ValueStr(r); s != want[r] {
			t.Fatalf("row %d is %s, want %s", r, s, want[r])
		}
	}
	return got
}

// TestConcatUnionsInside: structs and lists (a map among them) holding a
// dense union join as arrow-go would join them without one: the same
// rows, nulls where the parts had them, cut from larger arrays.
func TestConcatUnionsInside(t *testing.T) {
	union := arrow.DenseUnionOf([]arrow.Field{
		{Name: "i", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
	}, []arrow.UnionTypeCode{0, 1})
	appendUnion := func(b *array.DenseUnionBuilder, v int) {
		if v%2 == 0 {
			b.Append(0)
			b.Child(0).(*array.Int64Builder).Append(int64(v))
		} else {
			b.Append(1)
			b.Child(1).(*array.StringBuilder).Append(fmt.Sprintf("s%d", v))
		}
	}
	types := []arrow.DataType{
		arrow.StructOf(arrow.Field{Name: "u", Type: union}, arrow.Field{Name: "n", Type: arrow.PrimitiveTypes.Int32, Nullable: true}),
		arrow.ListOf(union),
		arrow.LargeListOf(arrow.StructOf(arrow.Field{Name: "u", Type: union})),
		arrow.MapOf(arrow.BinaryTypes.String, union),
	}
	for _, dt := range types {
		t.Run(dt.String(), func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
			defer mem.AssertSize(t, 0)
			build := func(n, seed int) arrow.Array {
				b := array.NewBuilder(mem, dt)
				defer b.Release()
				for r := range n {
					v := seed*100 + r
					if r%5 == 3 {
						b.AppendNull()
						continue
					}
					switch b := b.(type) {
					case *array.StructBuilder:
						b.Append(true)
						appendUnion(b.FieldBuilder(0).(*array.DenseUnionBuilder), v)
						b.FieldBuilder(1).(*array.Int32Builder).Append(int32(v))
					case *array.MapBuilder:
						b.Append(true)
						for k := range r % 3 {
							b.KeyBuilder().(*array.StringBuilder).Append(fmt.Sprintf("k%d", k))
							appendUnion(b.ItemBuilder().(*array.DenseUnionBuilder), v+k)
						}
					case *array.ListBuilder:
						b.Append(true)
						for k := range r % 3 {
							appendUnion(b.ValueBuilder().(*array.DenseUnionBuilder), v+k)
						}
					case *array.LargeListBuilder:
						b.Append(true)
						sb := b.ValueBuilder().(*array.StructBuilder)
						for k := range r % 3 {
							sb.Append(true)
							appendUnion(sb.FieldBuilder(0).(*array.DenseUnionBuilder), v+k)
						}
					}
				}
				return b.NewArray()
			}
			a, c := build(30, 1), build(8, 2)
			defer a.Release()
			defer c.Release()
			joinsCuts(t, mem, []piece{{a, 4, 13}, {c, 0, 8}, {a, 13, 13}, {a, 20, 30}, {c, 3, 4}}).Release()
		})
	}
}
