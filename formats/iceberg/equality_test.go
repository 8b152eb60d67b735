package iceberg

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// The typed key sets (integers in a bitmap or a map, bytes) and their fast
// paths must drop exactly the rows the generic encoding would: checked
// against a plain set of appendKey's keys, over types the fast paths take
// and types they leave to the generic path (uint32 and float64 data
// against integer keys; large strings against byte keys).
func TestKeySetsMatchGeneric(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 60 {
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		kt, dt := pickTypes(trial)
		span := []int64{50, 5000, 1 << 40}[trial%3] // bitmap, bitmap, map
		nulls := trial%4 == 0
		keyCol := randomColumn(mem, rng, kt, 40, span, nulls)
		// Data without nulls in every other ten trials: the integer
		// path has a loop of its own for it.
		dataCol := randomColumn(mem, rng, dt, 500, span, trial/10%2 == 0)

		set := &eqSet{columns: []string{"k"}, kind: kindOf([]arrow.DataType{kt}), keys: map[string]struct{}{}}
		plain := map[string]bool{}
		var ints []int64
		var key []byte
		for r := range keyCol.Len() {
			key = appendKey(key[:0], keyCol, r)
			set.add(key, &ints)
			plain[string(key)] = true
		}
		if set.kind == keyInts {
			// A delete file's column read whole (readEqualityDeletes'
			// path for int32 and int64 keys) gives the keys add does.
			fast := &eqSet{kind: keyInts}
			var fastInts []int64
			if fast.appendInts(keyCol, &fastInts) {
				if !slices.Equal(fastInts, ints) || fast.null != set.null {
					t.Fatalf("trial %d (%s keys): appendInts gave %v (null %t), add %v (null %t)", trial, kt, fastInts, fast.null, ints, set.null)
				}
			} else if kt.ID() == arrow.INT64 || kt.ID() == arrow.INT32 {
				t.Fatalf("trial %d: appendInts took no %s column", trial, kt)
			}
			set.ints = newIntKeys(ints)
		}
		schema := arrow.NewSchema([]arrow.Field{{Name: "k", Type: dt, Nullable: true}}, nil)
		b := array.NewRecordBatch(schema, []arrow.Array{dataCol}, int64(dataCol.Len()))
		keep, err := (&eqFilter{sets: []*eqSet{set}, columns: []string{"k"}}).Keep(context.Background(), b)
		if err != nil {
			t.Fatal(err)
		}
		for r := range dataCol.Len() {
			want := !plain[string(appendKey(nil, dataCol, r))]
			if keep.Value(r) != want {
				t.Fatalf("trial %d (%s keys, %s data, span %d): row %d (%s) kept %t, want %t", trial, kt, dt, span, r, dataCol.ValueStr(r), keep.Value(r), want)
			}
		}
		keep.Release()
		b.Release()
		keyCol.Release()
		dataCol.Release()
		mem.AssertSize(t, 0)
	}
}

func pickTypes(trial int) (key, data arrow.DataType) {
	switch trial % 10 {
	case 0, 1:
		return arrow.PrimitiveTypes.Int64, arrow.PrimitiveTypes.Int64
	case 2:
		return arrow.PrimitiveTypes.Int64, arrow.PrimitiveTypes.Int32 // a key promoted since the file
	case 3:
		return arrow.PrimitiveTypes.Int32, arrow.PrimitiveTypes.Uint32 // no fast path
	case 4:
		return arrow.PrimitiveTypes.Int64, arrow.PrimitiveTypes.Float64 // never equal
	case 5:
		return arrow.FixedWidthTypes.Date32, arrow.FixedWidthTypes.Date32
	case 6, 7:
		return arrow.BinaryTypes.String, arrow.BinaryTypes.String
	case 8:
		return arrow.BinaryTypes.String, arrow.BinaryTypes.LargeString // no fast path
	default:
		return arrow.PrimitiveTypes.Float64, arrow.PrimitiveTypes.Float64 // generic
	}
}

// randomColumn draws n values of type dt from a small domain (so that
// data rows hit keys), spread over span for integers.
func randomColumn(mem memory.Allocator, rng *rand.Rand, dt arrow.DataType, n int, span int64, nulls bool) arrow.Array {
	b := array.NewBuilder(mem, dt)
	defer b.Release()
	for range n {
		if nulls && rng.IntN(10) == 0 {
			b.AppendNull()
			continue
		}
		v := rng.Int64N(60) * (span / 60) // 60 values, spread
		if rng.IntN(3) == 0 {
			v = -v
		}
		switch b := b.(type) {
		case *array.Int64Builder:
			b.Append(v)
		case *array.Int32Builder:
			b.Append(int32(v))
		case *array.Uint32Builder:
			b.Append(uint32(v))
		case *array.Float64Builder:
			b.Append(float64(v))
		case *array.Date32Builder:
			b.Append(arrow.Date32(v))
		case *array.StringBuilder:
			b.Append(fmt.Sprint(v))
		case *array.LargeStringBuilder:
			b.Append(fmt.Sprint(v))
		}
	}
	return b.NewArray()
}
