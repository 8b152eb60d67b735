package engine

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/sluicedata/sluice/prefetch"
)

// The fast gathers give exactly what arrow's Take gives on the concatenated
// window, for every type with a fast path and one without, with nulls, and
// from sliced record batches, their columns gathered on one goroutine or
// several (run it with -race).
func TestGatherMatchesTake(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	schema := gatherTestSchema()
	r := rand.New(rand.NewPCG(1, 2))
	makeRec := func(n int, nullRate float64) arrow.RecordBatch {
		return makeGatherRec(mem, schema, r, n, nullRate)
	}
	for trial := range 40 {
		var recs []arrow.RecordBatch
		var starts []int64
		var rows int64
		for range 1 + r.IntN(4) {
			full := makeRec(50+r.IntN(200), []float64{0, 0.3}[trial%2])
			// A slice, as windows hold slices of decoded batches.
			lo := int64(r.IntN(10))
			rec := full.NewSlice(lo, full.NumRows())
			full.Release()
			recs = append(recs, rec)
			starts = append(starts, rows)
			rows += rec.NumRows()
		}
		w := &window{recs: recs, starts: starts}
		w.refs.n = 1
		var idx []int32
		permutation := trial%4 == 1
		switch {
		case permutation:
			// Every row once: the gather of a whole window's order,
			// which moves values in source order.
			for _, k := range r.Perm(int(rows)) {
				idx = append(idx, int32(k))
			}
		case trial%4 == 0:
			idx = make([]int32, 1+r.IntN(int(rows)))
			for i := range idx {
				idx[i] = int32(r.IntN(int(rows)))
			}
		default:
			// Runs of consecutive rows, across record batches too: the
			// gather by runs.
			for len(idx) == 0 || r.IntN(8) > 0 {
				from, n := r.IntN(int(rows)), 1+r.IntN(40)
				for k := from; k < min(from+n, int(rows)); k++ {
					idx = append(idx, int32(k))
				}
			}
		}
		// The same rows as two parts of one window: the gather of a batch
		// that spans windows.
		cut := r.IntN(len(idx) + 1)
		parts := []gatherPart{{w, idx[:cut]}, {w, idx[cut:]}}
		if trial%3 == 0 || permutation {
			parts = parts[:1]
			parts[0].idx = idx
		}
		g := newGatherPlan(parts)
		if permutation && trial%8 == 5 {
			// As a window is permuted once decoded.
			g = newPermutePlan(w, idx)
		}
		workers := []int{1, 3, 16}[trial%5%3]
		gs, out := schema, memory.Allocator(mem)
		if trial%3 == 2 {
			// Into Go's own allocator, without the list column: every
			// column then has a fast path, and the buffers come unzeroed
			// (filled with 0xa5 in a test binary), so a byte a fast path
			// leaves unset shows.
			gs, out = arrow.NewSchema(schema.Fields()[:schema.NumFields()-1], nil), memory.NewGoAllocator()
		}
		got, err := gatherOn(context.Background(), gs, g, out, workers)
		if err != nil {
			t.Fatal(err)
		}
		whole, err := arrowConcat(schema, recs, mem)
		if err != nil {
			t.Fatal(err)
		}
		ib := array.NewInt32Builder(mem)
		ib.AppendValues(idx, nil)
		indices := ib.NewInt32Array()
		ib.Release()
		for c := range gs.NumFields() {
			want, err := compute.TakeArray(compute.WithAllocator(context.Background(), mem), whole.Column(c), indices)
			if err != nil {
				t.Fatal(err)
			}
			if !array.Equal(want, got.Column(c)) {
				t.Fatalf("trial %d column %s (%d goroutines): gather differs from Take\n got %v\nwant %v", trial, schema.Field(c).Name, workers, got.Column(c), want)
			}
			if want.NullN() != got.Column(c).NullN() {
				t.Fatalf("trial %d column %s: %d nulls, want %d", trial, schema.Field(c).Name, got.Column(c).NullN(), want.NullN())
			}
			want.Release()
		}
		indices.Release()
		whole.Release()
		got.Release()
		w.release()
	}
}

// gatherTestSchema has every type with a gather path of its own, and one
// without (the list, last).
func gatherTestSchema() *arrow.Schema {
	return arrow.NewSchema([]arrow.Field{
		{Name: "i64", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "i32", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
		{Name: "f64", Type: arrow.PrimitiveTypes.Float64},
		{Name: "u8", Type: arrow.PrimitiveTypes.Uint8, Nullable: true},
		{Name: "b", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
		{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "ls", Type: arrow.BinaryTypes.LargeString, Nullable: true},
		{Name: "bin", Type: arrow.BinaryTypes.Binary, Nullable: true},
		{Name: "ts", Type: arrow.FixedWidthTypes.Timestamp_us, Nullable: true},
		{Name: "list", Type: arrow.ListOf(arrow.PrimitiveTypes.Int64), Nullable: true},
	}, nil)
}

// makeGatherRec is a record batch of gatherTestSchema of n random rows,
// each value null at nullRate where its field may be.
func makeGatherRec(mem memory.Allocator, schema *arrow.Schema, r *rand.Rand, n int, nullRate float64) arrow.RecordBatch {
	b := array.NewRecordBuilder(mem, schema)
	defer b.Release()
	for i := range n {
		null := func() bool { return r.Float64() < nullRate }
		appendOr := func(fb array.Builder, f func()) {
			if null() {
				fb.AppendNull()
			} else {
				f()
			}
		}
		appendOr(b.Field(0), func() { b.Field(0).(*array.Int64Builder).Append(r.Int64()) })
		appendOr(b.Field(1), func() { b.Field(1).(*array.Int32Builder).Append(r.Int32()) })
		b.Field(2).(*array.Float64Builder).Append(r.Float64())
		appendOr(b.Field(3), func() { b.Field(3).(*array.Uint8Builder).Append(uint8(i)) })
		appendOr(b.Field(4), func() { b.Field(4).(*array.BooleanBuilder).Append(r.IntN(2) == 0) })
		appendOr(b.Field(5), func() { b.Field(5).(*array.StringBuilder).Append(fmt.Sprint("s", r.IntN(1e6))) })
		appendOr(b.Field(6), func() { b.Field(6).(*array.LargeStringBuilder).Append(fmt.Sprint("L", i)) })
		appendOr(b.Field(7), func() { b.Field(7).(*array.BinaryBuilder).Append([]byte{byte(i), byte(i >> 8)}) })
		appendOr(b.Field(8), func() { b.Field(8).(*array.TimestampBuilder).Append(arrow.Timestamp(r.Int64N(1e15))) })
		appendOr(b.Field(9), func() {
			lb := b.Field(9).(*array.ListBuilder)
			lb.Append(true)
			lb.ValueBuilder().(*array.Int64Builder).Append(int64(i))
		})
	}
	return b.NewRecordBatch()
}

// concat gives what arrow's Concatenate gives, value for value and bit for
// bit of the bitmaps' last bytes, for slices of record batches with and
// without nulls, empty ones among them: through the gather into unzeroed
// buffers where every column has a path of its own (filled with 0xa5 in a
// test binary, so a byte the gather misses shows), through Concatenate
// where one does not.
func TestConcatMatchesArrow(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	all := gatherTestSchema()
	fast := arrow.NewSchema(all.Fields()[:all.NumFields()-1], nil)
	if !gathersFast(fast) || gathersFast(all) {
		t.Fatal("the schemas do not cover both ways")
	}
	r := rand.New(rand.NewPCG(3, 4))
	for trial := range 60 {
		schema := fast
		if trial%5 == 4 {
			schema = all
		}
		var recs []arrow.RecordBatch
		for range 1 + r.IntN(4) {
			full := makeGatherRec(mem, all, r, r.IntN(90), []float64{0, 0.3, 1}[trial%3])
			lo := r.Int64N(full.NumRows() + 1)
			hi := lo + r.Int64N(full.NumRows()-lo+1)
			cols := full.Columns()[:schema.NumFields()]
			narrowed := array.NewRecordBatch(schema, cols, full.NumRows())
			rec := narrowed.NewSlice(lo, hi)
			narrowed.Release()
			full.Release()
			recs = append(recs, rec)
		}
		got, err := concat(context.Background(), schema, recs, memory.NewGoAllocator())
		if err != nil {
			t.Fatal(err)
		}
		want, err := arrowConcat(schema, recs, mem)
		if err != nil {
			t.Fatal(err)
		}
		if got.NumRows() != want.NumRows() {
			t.Fatalf("trial %d: %d rows, want %d", trial, got.NumRows(), want.NumRows())
		}
		for c := range schema.NumFields() {
			g, w := got.Column(c), want.Column(c)
			if !array.Equal(g, w) || g.NullN() != w.NullN() {
				t.Fatalf("trial %d column %s: concat differs from Concatenate (%d nulls, want %d)\n got %v\nwant %v", trial, schema.Field(c).Name, g.NullN(), w.NullN(), g, w)
			}
			// The bits past the last row: arrow-go's builders leave them
			// clear, and so must a buffer that came unzeroed.
			n := g.Len()
			for k, b := range g.Data().Buffers() {
				bitmap := k == 0 || (k == 1 && g.DataType().ID() == arrow.BOOL)
				if b == nil || !bitmap || n%8 == 0 {
					continue
				}
				if last := b.Bytes()[n/8]; last>>(n%8) != 0 {
					t.Fatalf("trial %d column %s: bits past row %d set in buffer %d: %08b", trial, schema.Field(c).Name, n, k, last)
				}
			}
		}
		got.Release()
		want.Release()
		for _, rec := range recs {
			rec.Release()
		}
	}
}

// benchmarkPermute gathers a whole 131,072-row window (two record batches
// of int64, float64 and 10-20 byte strings) in a shuffled order of clumps.
func benchmarkPermute(b *testing.B, clump int) {
	mem := memory.NewGoAllocator()
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "x", Type: arrow.PrimitiveTypes.Float64},
		{Name: "s", Type: arrow.BinaryTypes.String},
	}, nil)
	r := rand.New(rand.NewPCG(1, 2))
	w := &window{}
	w.refs.n = 1
	const half = 65536
	for k := range 2 {
		rb := array.NewRecordBuilder(mem, schema)
		for i := range half {
			rb.Field(0).(*array.Int64Builder).Append(int64(k*half + i))
			rb.Field(1).(*array.Float64Builder).Append(r.Float64())
			rb.Field(2).(*array.StringBuilder).Append(fmt.Sprintf("%0*d", 10+r.IntN(11), i))
		}
		w.recs = append(w.recs, rb.NewRecordBatch())
		w.starts = append(w.starts, int64(k*half))
		rb.Release()
	}
	defer w.release()
	clumps := r.Perm(2 * half / clump)
	order := make([]int32, 0, 2*half)
	for _, c := range clumps {
		for j := range clump {
			order = append(order, int32(c*clump+j))
		}
	}
	for b.Loop() {
		got, err := gatherWindow(context.Background(), schema, w, order, mem)
		if err != nil {
			b.Fatal(err)
		}
		got.Release()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(order)), "ns/row")
}

func BenchmarkPermute(b *testing.B)        { benchmarkPermute(b, 1) }
func BenchmarkPermuteClump16(b *testing.B) { benchmarkPermute(b, 16) }

// BenchmarkScatterFloor is the part of a shuffled read's cost that no
// implementation of the permute avoids: 131,072 int64 values (a window of
// the bench's table) written each to its shuffled row. "fresh" is what a
// permute does, into a new buffer that the runtime zeroes first; "warm"
// writes into the same buffer every time, already in the core's cache, and
// is the floor of the random writes alone. Eight source columns take turns,
// so that the values read are not the ones just read, as a window's are
// not. docs/performance.md sets these beside a storage-order read's cost.
func BenchmarkScatterFloor(b *testing.B) {
	const n = 1 << 17
	r := rand.New(rand.NewPCG(1, 2))
	inv := make([]int32, n)
	for i, v := range r.Perm(n) {
		inv[v] = int32(i)
	}
	srcs := make([]arrow.ArrayData, 8)
	bufs := make([][]byte, 8)
	for k := range srcs {
		ib := array.NewInt64Builder(memory.DefaultAllocator)
		for i := range n {
			ib.Append(int64(i))
		}
		a := ib.NewInt64Array()
		srcs[k], bufs[k] = a.Data(), a.Data().Buffers()[1].Bytes()
		defer a.Release()
	}
	perValue := func(b *testing.B) {
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/value")
	}
	k := 0
	b.Run("fresh", func(b *testing.B) {
		for b.Loop() {
			out := make([]byte, 8*n)
			scatterWords(arrow.Uint64Traits.CastFromBytes, out, bufs[k%8:k%8+1], srcs[k%8:k%8+1], inv)
			k++
		}
		perValue(b)
	})
	warm := make([]byte, 8*n)
	b.Run("warm", func(b *testing.B) {
		for b.Loop() {
			scatterWords(arrow.Uint64Traits.CastFromBytes, warm, bufs[k%8:k%8+1], srcs[k%8:k%8+1], inv)
			k++
		}
		perValue(b)
	})
}

// A gather row by row whose rows hold no string bytes at all (every one
// null or empty) from record batches that do hold long strings: each value
// is moved as a 32-byte block into room reserved past the end, and with no
// bytes to keep that room must not be given back first (it was: Resize to
// zero freed the buffer, and the first move panicked).
func TestGatherVarNoBytes(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	schema := arrow.NewSchema([]arrow.Field{{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true}}, nil)
	b := array.NewRecordBuilder(mem, schema)
	sb := b.Field(0).(*array.StringBuilder)
	for i := range 64 {
		switch i % 3 {
		case 0:
			sb.AppendNull()
		case 1:
			sb.Append("")
		default:
			sb.Append(fmt.Sprintf("a long string of more than thirty-two bytes, row %d", i))
		}
	}
	rec := b.NewRecordBatch()
	b.Release()
	defer rec.Release()
	var src []source
	for row := int32(0); row < 60; row++ {
		if row%3 != 2 {
			src = append(src, source{rec: 0, row: row})
		}
	}
	for _, used := range [][][2]int32{nil, {{0, 60}}} {
		// One run per row (no spans): the row-by-row gathers, without and
		// with the rows known up front.
		g := newSourcePlan([]arrow.RecordBatch{rec}, src, used, len(src))
		got, err := gatherBy(context.Background(), schema, g, mem)
		if err != nil {
			t.Fatal(err)
		}
		col := got.Column(0).(*array.String)
		for i := range col.Len() {
			if want := src[i].row%3 == 0; col.IsNull(i) != want || col.Value(i) != "" {
				t.Fatalf("row %d: null %v %q, want null %v and empty", i, col.IsNull(i), col.Value(i), want)
			}
		}
		got.Release()
	}
}

// A window is permuted on its share of the cores, and on as many as its
// columns where the cut stage waits for it, whatever the other decodes.
func TestPermuteWorkers(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(8))
	bg := context.Background()
	for _, c := range []struct {
		cols     int
		rows     int64
		decoding int64
		want     int
	}{
		{1, 1 << 20, 0, 1},
		{5, minSpreadRows - 1, 0, 1},
		{5, 1 << 20, 1, 5},
		{5, 1 << 20, 4, 2},
		{5, 1 << 20, 16, 1},
		{12, 1 << 20, 1, 8},
	} {
		decodingWindows.Add(c.decoding)
		got := permuteWorkers(bg, c.cols, c.rows)
		decodingWindows.Add(-c.decoding)
		if got != c.want {
			t.Errorf("%d columns, %d rows, %d windows decoding: %d goroutines, want %d", c.cols, c.rows, c.decoding, got, c.want)
		}
	}
	// Waited for: every column its goroutine, up to the cores.
	decodingWindows.Add(64)
	defer decodingWindows.Add(-64)
	for _, c := range [][2]int{{5, 5}, {12, 8}} {
		st := prefetch.Stage[int, int]{Waited: true, Fn: func(ctx context.Context, cols int) (int, error) {
			return permuteWorkers(ctx, cols, 1<<20), nil
		}}
		for got, err := range prefetch.Map(bg, prefetch.FromSeq(slices.Values(c[:1])), st) {
			if err != nil {
				t.Fatal(err)
			}
			if got != c[1] {
				t.Errorf("waited for, %d columns, 64 windows decoding: %d goroutines, want %d", c[0], got, c[1])
			}
		}
	}
}

// moveExact copies every length from 0 to 40 exactly: each byte of dst
// from src, and nothing on either side of it.
func TestMoveExact(t *testing.T) {
	src := make([]byte, 64)
	for i := range src {
		src[i] = byte(i + 1)
	}
	for n := range 41 {
		for at := range 3 {
			buf := make([]byte, 48+8)
			for i := range buf {
				buf[i] = 0xee
			}
			moveExact(buf[8+at:8+at+n], src[at:at+n])
			for i, b := range buf {
				want := byte(0xee)
				if i >= 8+at && i < 8+at+n {
					want = src[at+i-8-at]
				}
				if b != want {
					t.Fatalf("%d bytes from %d: byte %d is %#x, want %#x", n, at, i, b, want)
				}
			}
		}
	}
}
