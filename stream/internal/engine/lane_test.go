package engine

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/sluicedata/sluice/permutation"
)

// BenchmarkInterleave is the mix's own work per chunk, apart from the
// sources' pipelines: the walk's sources for 8,192 rows of three sources
// weighted 2:1:1, and the chunk put together from runs of the lanes' rows
// (bench-shaped columns: int64, int64, float64, a 10-20 byte string).
func BenchmarkInterleave(b *testing.B) {
	mem := memory.NewGoAllocator()
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "label", Type: arrow.PrimitiveTypes.Int64},
		{Name: "x", Type: arrow.PrimitiveTypes.Float64},
		{Name: "s", Type: arrow.BinaryTypes.String},
	}, nil)
	r := rand.New(rand.NewPCG(1, 2))
	const laneRows = 8192
	lanes := make([]arrow.RecordBatch, 3)
	for k := range lanes {
		rb := array.NewRecordBuilder(mem, schema)
		for i := range laneRows {
			rb.Field(0).(*array.Int64Builder).Append(int64(i))
			rb.Field(1).(*array.Int64Builder).Append(int64(k))
			rb.Field(2).(*array.Float64Builder).Append(r.Float64())
			rb.Field(3).(*array.StringBuilder).Append(fmt.Sprintf("%0*d", 10+r.IntN(11), i))
		}
		lanes[k] = rb.NewRecordBatch()
		rb.Release()
		defer lanes[k].Release()
	}
	m, err := permutation.NewMix(permutation.MixOrder{Weights: []float64{2, 1, 1}, Repeat: true, NumSplits: 1}, [][]int64{{1 << 40}, {1 << 40}, {1 << 40}})
	if err != nil {
		b.Fatal(err)
	}
	w, err := m.Walk(0, 0, 0)
	if err != nil {
		b.Fatal(err)
	}
	const batch = 8192 // a chunk
	srcOf := make([]int, batch)
	off := make([]int64, 3)
	var rows int64
	for b.Loop() {
		before := w.Taken(nil)
		if w.NextSources(srcOf) != batch {
			b.Fatal("the walk ended")
		}
		counts := w.Taken(nil)
		for k := range counts {
			counts[k] -= before[k]
		}
		var parts []arrow.RecordBatch
		at := make([]cutRun, 3)
		for k, c := range counts {
			if off[k]+c > laneRows {
				off[k] = 0
			}
			at[k] = cutRun{rec: int32(len(parts)), row: int32(off[k]), left: int32(laneRows - off[k])}
			lanes[k].Retain()
			parts = append(parts, lanes[k])
			off[k] += c
		}
		src := make([]source, batch)
		used, runs := runSources(src, srcOf, at, counts, parts)
		out, err := interleave(context.Background(), schema, parts, src, used, runs, mem)
		if err != nil {
			b.Fatal(err)
		}
		rows += out.NumRows()
		out.Release()
		for _, p := range parts {
			p.Release()
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(rows), "ns/row")
}

// TestInterleaveRows: a mixed batch put together from its sources' runs
// has, at every row, the value of the source row it names, for every
// column type, with nulls, values longer and shorter than the short-value
// move, values at the very end of their buffers, and sliced parts.
func TestInterleaveRows(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "i64", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "f32", Type: arrow.PrimitiveTypes.Float32},
		{Name: "b", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
		{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "ls", Type: arrow.BinaryTypes.LargeString},
		{Name: "list", Type: arrow.ListOf(arrow.PrimitiveTypes.Int64), Nullable: true},
	}, nil)
	r := rand.New(rand.NewPCG(3, 4))
	word := func() string {
		b := make([]byte, r.IntN(70))
		for i := range b {
			b[i] = byte('a' + r.IntN(26))
		}
		return string(b)
	}
	makeRec := func(n int, nulls bool) arrow.RecordBatch {
		b := array.NewRecordBuilder(mem, schema)
		defer b.Release()
		for i := range n {
			null := nulls && r.IntN(4) == 0
			if null {
				b.Field(0).AppendNull()
				b.Field(2).AppendNull()
				b.Field(3).AppendNull()
				b.Field(5).AppendNull()
			} else {
				b.Field(0).(*array.Int64Builder).Append(r.Int64())
				b.Field(2).(*array.BooleanBuilder).Append(r.IntN(2) == 0)
				b.Field(3).(*array.StringBuilder).Append(word())
				lb := b.Field(5).(*array.ListBuilder)
				lb.Append(true)
				lb.ValueBuilder().(*array.Int64Builder).Append(int64(i))
			}
			b.Field(1).(*array.Float32Builder).Append(r.Float32())
			b.Field(4).(*array.LargeStringBuilder).Append(word())
		}
		return b.NewRecordBatch()
	}
	// Without the list column every column takes a fast path; with it the
	// batch goes through the general gather.
	fast := arrow.NewSchema(schema.Fields()[:5], nil)
	project := func(rec arrow.RecordBatch) arrow.RecordBatch {
		defer rec.Release()
		return array.NewRecordBatch(fast, rec.Columns()[:5], rec.NumRows())
	}
	full := schema
	for trial := range 60 {
		schema := full
		if trial%3 != 0 {
			schema = fast
		}
		sources := 1 + r.IntN(4)
		// Each source's runs: one to three record batches, the first
		// taken from a row on, as a lane's current batch is.
		var parts []arrow.RecordBatch
		at := make([]cutRun, sources)
		rows := make([]int, sources)
		for k := range sources {
			for p := range 1 + r.IntN(3) {
				whole := makeRec(1+r.IntN(80), trial%2 == 0)
				rec := whole
				if r.IntN(2) == 0 {
					rec = whole.NewSlice(int64(r.IntN(int(whole.NumRows()))), whole.NumRows())
					whole.Release()
				}
				if schema == fast {
					rec = project(rec)
				}
				if p == 0 {
					row := r.IntN(int(rec.NumRows()))
					at[k] = cutRun{rec: int32(len(parts)), row: int32(row), left: int32(rec.NumRows()) - int32(row)}
					rows[k] -= row
				}
				rows[k] += int(rec.NumRows())
				parts = append(parts, rec)
			}
		}
		var srcOf []int
		for k, n := range rows {
			for range n - r.IntN(n+1)/3 { // some rows of the last part unused
				srcOf = append(srcOf, k)
			}
		}
		r.Shuffle(len(srcOf), func(i, j int) { srcOf[i], srcOf[j] = srcOf[j], srcOf[i] })
		start := slices.Clone(at)
		src := make([]source, len(srcOf))
		counts := make([]int64, sources)
		for _, k := range srcOf {
			counts[k]++
		}
		used, runs := runSources(src, srcOf, at, counts, parts)
		want := 0
		for i, s := range src {
			if i == 0 || s.rec != src[i-1].rec || s.row != src[i-1].row+1 {
				want++
			}
		}
		if runs != want {
			t.Fatalf("trial %d: runSources counted %d runs, src holds %d", trial, runs, want)
		}
		out, err := interleave(context.Background(), schema, parts, src, used, runs, mem)
		if err != nil {
			t.Fatal(err)
		}
		// The reference: each source's rows in order, from where it began.
		next := start
		for i, k := range srcOf {
			p := &next[k]
			if p.left == 0 {
				p.rec++
				p.row, p.left = 0, int32(parts[p.rec].NumRows())
			}
			for c := range schema.NumFields() {
				if !array.SliceEqual(out.Column(c), int64(i), int64(i+1), parts[p.rec].Column(c), int64(p.row), int64(p.row+1)) {
					t.Fatalf("trial %d row %d column %s: %v, want part %d row %d: %v", trial, i, schema.Field(c).Name,
						out.Column(c).ValueStr(i), p.rec, p.row, parts[p.rec].Column(c).ValueStr(int(p.row)))
				}
			}
			p.row++
			p.left--
		}
		out.Release()
		for _, p := range parts {
			p.Release()
		}
	}
}

// TestLaneWindows: a lane's read-ahead is its part of its source's
// rounded to the nearest window, one at least: the half-weight lane of a
// source reading 3 windows ahead reads 2 (rounded down it read 1, and the
// mix waited on its decoder).
func TestLaneWindows(t *testing.T) {
	for _, c := range []struct {
		windows int
		part    float64
		want    int
	}{
		{3, 0.5, 2}, {3, 0.25, 1}, {3, 1, 3}, {3, 1.0 / 3, 1}, {3, 0.01, 1},
		{17, 0.5, 9}, {17, 0.25, 4}, {17, 0.125, 2}, {10, 0.3, 3}, {10, 0.35, 4}, {1, 0.5, 1},
	} {
		if got := laneWindows(c.windows, c.part); got != c.want {
			t.Errorf("laneWindows(%d, %v) = %d, want %d", c.windows, c.part, got, c.want)
		}
	}
}
