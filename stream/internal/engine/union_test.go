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
	cuts := []struct {
		src    arrow.Array
		lo, hi int64
	}{{a, 5, 17}, {a, 17, 17}, {c, 2, 9}, {a, 0, 3}, {a, 30, 40}, {c, 0, 1}}
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
	defer got.Release()
	if got.Len() != len(want) {
		t.Fatalf("%d rows, want %d", got.Len(), len(want))
	}
	for r := range want {
		if s := got.ValueStr(r); s != want[r] {
			t.Fatalf("row %d is %s, want %s", r, s, want[r])
		}
	}
	u := got.(*array.DenseUnion)
	if n := u.Field(0).Len() + u.Field(1).Len(); n != len(want) {
		t.Errorf("members hold %d values for %d rows: more than the rows point to", n, len(want))
	}
}
