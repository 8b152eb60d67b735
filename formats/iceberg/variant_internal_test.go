package iceberg

import (
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/extensions"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/variant"
)

// TestVariantNullMetadata refuses a plain struct read as a variant where a
// row's metadata is null and the variant is not, naming the row of the
// slice converted; a null variant's null fields are fine.
func TestVariantNullMetadata(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	typ := arrow.StructOf(
		arrow.Field{Name: "metadata", Type: arrow.BinaryTypes.Binary, Nullable: true},
		arrow.Field{Name: "value", Type: arrow.BinaryTypes.Binary, Nullable: true},
	)
	b := array.NewStructBuilder(mem, typ)
	defer b.Release()
	md, val := b.FieldBuilder(0).(*array.BinaryBuilder), b.FieldBuilder(1).(*array.BinaryBuilder)
	v, err := variant.Of(int8(42))
	if err != nil {
		t.Fatal(err)
	}
	meta := v.Metadata().Bytes()
	for i := range 6 {
		switch i {
		case 2:
			b.AppendNull() // a null variant, its fields null
		case 4:
			b.Append(true) // a variant whose metadata is missing
			md.AppendNull()
			val.Append(v.Bytes())
		default:
			b.Append(true)
			md.Append(meta)
			val.Append(v.Bytes())
		}
	}
	arr := b.NewStructArray()
	defer arr.Release()
	conv, err := variantConverter(typ, extensions.NewDefaultVariantType())
	if err != nil {
		t.Fatal(err)
	}
	ok := array.NewSlice(arr, 0, 4) // rows 0-3: no missing metadata
	defer ok.Release()
	d, err := conv(ok.Data(), mem)
	if err != nil {
		t.Fatalf("rows 0-3: %v", err)
	}
	got := array.MakeFromData(d).(*extensions.VariantArray)
	if got.Len() != 4 || !got.IsNull(2) || got.IsNull(1) {
		t.Errorf("rows 0-3 read as %v", got)
	} else if x, err := got.Value(3); err != nil || x.Value() != int8(42) {
		t.Errorf("row 3 reads %v (%v), want 42", x, err)
	}
	got.Release()
	d.Release()
	bad := array.NewSlice(arr, 3, 6)
	defer bad.Release()
	if _, err := conv(bad.Data(), mem); err == nil || !strings.Contains(err.Error(), "row 1 ") || !strings.Contains(err.Error(), "metadata is null") {
		t.Errorf("rows 3-5, the second without metadata: %v", err)
	}
}
