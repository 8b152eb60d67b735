package formats

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// compactBatch is a batch of every type compact copies itself and some it
// hands to arrow's kernel, nulls in every other column, sliced so that its
// arrays start at an offset.
func compactBatch(t *testing.T, r *rand.Rand, n int, mem memory.Allocator) arrow.RecordBatch {
	t.Helper()
	fields := []arrow.Field{
		{Name: "i64", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "i32", Type: arrow.PrimitiveTypes.Int32},
		{Name: "f64", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		{Name: "b", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
		{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "ls", Type: arrow.BinaryTypes.LargeString},
		{Name: "bin", Type: arrow.BinaryTypes.Binary, Nullable: true},
		{Name: "fsb", Type: &arrow.FixedSizeBinaryType{ByteWidth: 3}, Nullable: true},
		{Name: "dec", Type: &arrow.Decimal128Type{Precision: 20, Scale: 2}},
		{Name: "ts", Type: arrow.FixedWidthTypes.Timestamp_us, Nullable: true},
		{Name: "list", Type: arrow.ListOf(arrow.PrimitiveTypes.Int32), Nullable: true},
		{Name: "dict", Type: &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int8, ValueType: arrow.BinaryTypes.String}},
		{Name: "struct", Type: arrow.StructOf(arrow.Field{Name: "a", Type: arrow.PrimitiveTypes.Int16, Nullable: true}), Nullable: true},
		{Name: "null", Type: arrow.Null, Nullable: true},
	}
	schema := arrow.NewSchema(fields, nil)
	rb := array.NewRecordBuilder(mem, schema)
	defer rb.Release()
	const skip = 3 // rows sliced off the front
	for i := range n + skip + 2 {
		null := func(c int) bool { return fields[c].Nullable && r.IntN(5) == 0 }
		for c, fb := range rb.Fields() {
			if null(c) {
				fb.AppendNull()
				continue
			}
			switch fb := fb.(type) {
			case *array.Int64Builder:
				fb.Append(r.Int64())
			case *array.Int32Builder:
				fb.Append(r.Int32())
			case *array.Float64Builder:
				fb.Append(r.NormFloat64())
			case *array.BooleanBuilder:
				fb.Append(r.IntN(2) == 0)
			case *array.StringBuilder:
				fb.Append(fmt.Sprintf("s%d-%s", i, string(make([]byte, r.IntN(4)))))
			case *array.LargeStringBuilder:
				fb.Append(fmt.Sprintf("large %d", r.IntN(1000)))
			case *array.BinaryBuilder:
				fb.Append([]byte(fmt.Sprint(i * 7)))
			case *array.FixedSizeBinaryBuilder:
				fb.Append([]byte{byte(i), byte(i >> 8), byte(r.IntN(256))})
			case *array.Decimal128Builder:
				fb.Append(decimal128.New(r.Int64N(100)-50, r.Uint64()))
			case *array.TimestampBuilder:
				fb.Append(arrow.Timestamp(r.Int64N(1 << 50)))
			case *array.ListBuilder:
				fb.Append(true)
				for range r.IntN(3) {
					fb.ValueBuilder().(*array.Int32Builder).Append(r.Int32())
				}
			case *array.BinaryDictionaryBuilder:
				if err := fb.AppendString(fmt.Sprint("word", r.IntN(4))); err != nil {
					t.Fatal(err)
				}
			case *array.StructBuilder:
				fb.Append(true)
				fb.FieldBuilder(0).(*array.Int16Builder).Append(int16(i))
			case *array.NullBuilder:
				fb.AppendNull()
			default:
				t.Fatalf("no value for %T", fb)
			}
		}
	}
	whole := rb.NewRecordBatch()
	defer whole.Release()
	return whole.NewSlice(skip, int64(skip+n))
}

// The run-by-run copy keeps exactly the rows arrow's filter kernel keeps,
// every value and null of every column, where deletes fall at a batch's
// first and last rows, in runs, one row apart, on every row, on none but
// one, and at random; on batches that start at an offset. Through a
// checked allocator (no leak) and Go's (buffers unzeroed, which in a test
// come filled with 0xa5: a byte left unset is a wrong value).
func TestCompactMatchesFilterKernel(t *testing.T) {
	checked := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer checked.AssertSize(t, 0)
	for _, mem := range []memory.Allocator{checked, memory.DefaultAllocator} {
		testCompact(t, mem)
	}
}

func testCompact(t *testing.T, mem memory.Allocator) {
	ctx := context.Background()
	r := rand.New(rand.NewPCG(4, 6))
	patterns := map[string]func(i, n int) bool{
		"first":       func(i, n int) bool { return i != 0 },
		"last":        func(i, n int) bool { return i != n-1 },
		"first, last": func(i, n int) bool { return i != 0 && i != n-1 },
		"all":         func(i, n int) bool { return false },
		"all but one": func(i, n int) bool { return i == n/2 },
		"every other": func(i, n int) bool { return i%2 == 0 },
		"runs":        func(i, n int) bool { return (i/70)%2 == 1 },
		"word edges":  func(i, n int) bool { return i%64 != 63 && i%64 != 0 },
		"random 1%":   func(i, n int) bool { return r.IntN(100) != 0 },
		"random half": func(i, n int) bool { return r.IntN(2) == 0 },
	}
	for _, n := range []int{1, 7, 64, 65, 200, 1000} {
		for name, kept := range patterns {
			t.Run(fmt.Sprintf("%d rows, %s", n, name), func(t *testing.T) {
				b := compactBatch(t, r, n, mem)
				keep := make([]byte, bitutil.BytesForBits(int64(n)))
				stays := make([]bool, n)
				for i := range n {
					if stays[i] = kept(i, n); stays[i] {
						bitutil.SetBit(keep, i)
					}
				}
				mask := array.NewBooleanData(array.NewData(arrow.FixedWidthTypes.Boolean, n, []*memory.Buffer{nil, memory.NewBufferBytes(keep)}, nil, 0, 0))
				defer mask.Release()
				want, err := compute.FilterRecordBatch(ctx, b, mask, compute.DefaultFilterOptions())
				if err != nil {
					t.Fatal(err)
				}
				defer want.Release()
				b.Retain()
				got, err := compact(ctx, b, keep, mem)
				if err != nil {
					t.Fatal(err)
				}
				defer got.Release()
				defer b.Release()
				// Row by row against the batch itself: the kernel is a
				// second opinion, not the reference.
				j := 0
				for i := range n {
					if !stays[i] {
						continue
					}
					for c := range int(b.NumCols()) {
						if j >= int(got.NumRows()) || !array.SliceEqual(b.Column(c), int64(i), int64(i+1), got.Column(c), int64(j), int64(j+1)) {
							t.Fatalf("column %s: row %d (kept as %d) differs", b.ColumnName(c), i, j)
						}
					}
					j++
				}
				if got.NumRows() != want.NumRows() {
					t.Fatalf("%d rows, want %d", got.NumRows(), want.NumRows())
				}
				for c := range int(got.NumCols()) {
					g, w := got.Column(c), want.Column(c)
					if !array.Equal(g, w) {
						t.Errorf("column %s:\n got %v\nwant %v", got.ColumnName(c), g, w)
					}
					if g.NullN() != w.NullN() {
						t.Errorf("column %s: %d nulls, want %d", got.ColumnName(c), g.NullN(), w.NullN())
					}
					if err := array.ValidateFull(g); err != nil {
						t.Errorf("column %s: %v", got.ColumnName(c), err)
					}
				}
			})
		}
	}
}

// and drops the rows a filter answers false or null for, at an offset too.
func TestAndFilterAnswer(t *testing.T) {
	for _, off := range []int{0, 5} {
		bb := array.NewBooleanBuilder(memory.DefaultAllocator)
		var want []bool
		for i := range 21 + off {
			switch i % 3 {
			case 0:
				bb.Append(true)
				want = append(want, true)
			case 1:
				bb.Append(false)
				want = append(want, false)
			default:
				bb.AppendNull()
				want = append(want, false)
			}
		}
		whole := bb.NewBooleanArray()
		k := array.NewSlice(whole, int64(off), int64(off+21)).(*array.Boolean)
		want = want[off:]
		keep := allKept(21)
		bitutil.ClearBit(keep, 0) // a row the mask drops stays dropped
		want[0] = false
		and(keep, k)
		for i := range 21 {
			if bitutil.BitIsSet(keep, i) != want[i] {
				t.Errorf("offset %d row %d: kept %v, want %v", off, i, !want[i], want[i])
			}
		}
		k.Release()
		whole.Release()
		bb.Release()
	}
}

// TestKeptRuns checks the runs against a walk bit by bit, over lengths
// around word edges, densities from none kept to all, and set bits past n
// (allKept leaves them in its last byte), which are no rows.
func TestKeptRuns(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	for _, n := range []int{0, 1, 7, 8, 63, 64, 65, 127, 128, 129, 200, 1000, 8192} {
		for _, p := range []float64{0, 0.01, 0.1, 0.5, 0.9, 0.99, 1} {
			for range 20 {
				keep := make([]byte, int(bitutil.BytesForBits(int64(n)))+r.IntN(3))
				for i := range keep {
					keep[i] = byte(r.Uint32()) // bits past n: anything
				}
				for i := range n {
					bitutil.SetBitTo(keep, i, r.Float64() < p)
				}
				var want [][2]int
				wantKept, start := 0, -1
				for i := range n + 1 {
					set := i < n && bitutil.BitIsSet(keep, i)
					switch {
					case set && start < 0:
						start = i
					case !set && start >= 0:
						want = append(want, [2]int{start, i})
						wantKept += i - start
						start = -1
					}
				}
				runs, kept := keptRuns(keep, n)
				if kept != wantKept || fmt.Sprint(runs) != fmt.Sprint(want) {
					t.Fatalf("n %d, p %v: runs %v (%d kept), want %v (%d)", n, p, runs, kept, want, wantKept)
				}
			}
		}
	}
}
