package orc_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"golang.org/x/sync/errgroup"

	"github.com/sluicedata/sluice/formats"
	"github.com/sluicedata/sluice/formats/orc"
	"github.com/sluicedata/sluice/storage"
)

// decodeParts fetches rows [lo, hi) of fragment 0 once and decodes them in
// parts cut at cuts, as the stream's windows decode their pieces of one
// fetch, calling check with each batch and the row it starts at.
func decodeParts(t testing.TB, ds *formats.Scan, lo, hi int64, cuts []int64, batchRows int, mem memory.Allocator, check func(b arrow.RecordBatch, at int64) error) {
	t.Helper()
	ctx := context.Background()
	whole, err := ds.Fetch(ctx, 0, ds.RowRange(0, lo, hi))
	if err != nil {
		t.Fatal(err)
	}
	defer whole.Release()
	bounds := append(append([]int64{lo}, cuts...), hi)
	for i := range len(bounds) - 1 {
		part, err := whole.Part(ds.RowRange(0, bounds[i], bounds[i+1]))
		if err != nil {
			t.Fatal(err)
		}
		at := bounds[i]
		_, err = ds.Decode(ctx, part, batchRows, mem, func(b arrow.RecordBatch) error {
			defer b.Release()
			err := check(b, at)
			at += b.NumRows()
			return err
		})
		part.Release()
		if err != nil {
			t.Fatalf("part [%d, %d): %v", bounds[i], bounds[i+1], err)
		}
		if at != bounds[i+1] {
			t.Fatalf("part [%d, %d) read %d rows", bounds[i], bounds[i+1], at-bounds[i])
		}
	}
}

// randomCuts cuts [lo, hi) at n sorted distinct rows inside it.
func randomCuts(rng *rand.Rand, lo, hi int64, n int) []int64 {
	seen := map[int64]bool{}
	var cuts []int64
	for range n {
		if hi-lo < 2 {
			break
		}
		c := lo + 1 + rng.Int64N(hi-lo-1)
		if !seen[c] {
			seen[c] = true
			cuts = append(cuts, c)
		}
	}
	slices.Sort(cuts)
	return cuts
}

// TestPartsMatchWholeRead: a fetch decoded in parts cut anywhere (each
// part started at its row group from the fetched streams) gives, value by
// value, the rows of a whole read, for files of every codec, nulls,
// direct and dictionary strings, timestamps, decimals and unions.
func TestPartsMatchWholeRead(t *testing.T) {
	seeks0 := orc.PartSeeks()
	_, reseeks0 := orc.SeekCounts()
	files := slices.Concat(seekFiles, []string{"TestOrcFile.testMemoryManagementV12", "decimal", "orc_index_int_string", "TestOrcFile.testPredicatePushdown"})
	againstWholeRead(t, files, 46, func(t *testing.T, ds *formats.Scan, whole []arrow.Array, rng *rand.Rand, mem memory.Allocator) {
		rows := ds.Fragments[0].Rows
		for round := range 4 {
			lo, hi := int64(0), rows
			if round > 0 {
				lo = rng.Int64N(rows)
				hi = lo + 1 + rng.Int64N(rows-lo)
			}
			cuts := randomCuts(rng, lo, hi, 3+rng.IntN(12))
			decodeParts(t, ds, lo, hi, cuts, 1+rng.IntN(5000), mem, func(b arrow.RecordBatch, at int64) error {
				return sameAsWhole(ds, whole, b, at)
			})
		}
	})
	if orc.PartSeeks() == seeks0 {
		t.Error("no part started at its row group")
	}
	if _, reseeks := orc.SeekCounts(); reseeks != reseeks0 {
		t.Errorf("%d parts could not be decoded from their row group and were read again whole", reseeks-reseeks0)
	}
}

// sameAsWhole compares every value of b, whose first row is row at, with
// the whole read's.
func sameAsWhole(ds *formats.Scan, whole []arrow.Array, b arrow.RecordBatch, at int64) error {
	for c, col := range b.Columns() {
		if _, ok := col.DataType().(arrow.UnionType); ok {
			// readRange keeps unions as their text.
			text := whole[c].(*array.String)
			for i := range col.Len() {
				if got := fmt.Sprint(col.GetOneForMarshal(i)); got != text.Value(int(at)+i) {
					return fmt.Errorf("row %d column %q: %s, the whole read has %s", at+int64(i), ds.Schema.Field(c).Name, got, text.Value(int(at)+i))
				}
			}
			continue
		}
		want := array.NewSlice(whole[c], at, at+b.NumRows())
		same := array.Equal(want, col)
		want.Release()
		if !same {
			return fmt.Errorf("rows [%d, %d) column %q differ from the whole read's", at, at+b.NumRows(), ds.Schema.Field(c).Name)
		}
	}
	return nil
}

// demo12Row is row n of demo-12 (TPC-DS's customer_demographics): the
// cross product of its eight attributes, the first varying fastest.
func demo12Row(n int64) [9]any {
	k := n
	next := func(m int64) int64 {
		v := k % m
		k /= m
		return v
	}
	gender := []string{"M", "F"}[next(2)]
	marital := []string{"M", "S", "D", "W", "U"}[next(5)]
	education := []string{"Primary", "Secondary", "College", "2 yr Degree", "4 yr Degree", "Advanced Degree", "Unknown"}[next(7)]
	purchase := int32(next(20)+1) * 500
	credit := []string{"Good", "Low Risk", "High Risk", "Unknown"}[next(4)]
	dep, employed, college := int32(next(7)), int32(next(7)), int32(next(7))
	return [9]any{int32(n + 1), gender, marital, education, purchase, credit, dep, employed, college}
}

// checkDemo12 compares every value of b, whose first row is row at, with
// demo12Row.
func checkDemo12(b arrow.RecordBatch, at int64) error {
	for i := range int(b.NumRows()) {
		want := demo12Row(at + int64(i))
		for c := range 9 {
			col := b.Column(c)
			if col.IsNull(i) {
				return fmt.Errorf("row %d column %d: null, want %v", at+int64(i), c, want[c])
			}
			var got any
			switch a := col.(type) {
			case *array.Int32:
				got = a.Value(i)
			case *array.String:
				got = a.Value(i)
			default:
				return fmt.Errorf("column %d is %s", c, col.DataType())
			}
			if got != want[c] {
				return fmt.Errorf("row %d column %d: %v, want %v", at+int64(i), c, got, want[c])
			}
		}
	}
	return nil
}

// TestDemo12EveryValue reads ORC's demo-12 (Hive, zlib, one stripe of
// 1.9M rows in streams of one to four 256 KiB blocks, RLE v1 and v2,
// dictionary strings) whole and as a fetch decoded in parts, and checks
// every value against the table it holds.
func TestDemo12EveryValue(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	ds := plan(t, []string{filepath.Join(orcExamples(t), "demo-12-zlib.orc")}, nil)
	rows := ds.Fragments[0].Rows
	if rows != 1920800 {
		t.Fatalf("%d rows, want 1920800", rows)
	}
	at := int64(0)
	err := readAll(ds, 65536, mem, func(b arrow.RecordBatch) error {
		err := checkDemo12(b, at)
		at += b.NumRows()
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if at != rows {
		t.Fatalf("read %d rows", at)
	}
	seeks0 := orc.PartSeeks()
	_, reseeks0 := orc.SeekCounts()
	rng := rand.New(rand.NewPCG(12, 46))
	cuts := randomCuts(rng, 0, rows, 29)
	if raceEnabled {
		cuts = cuts[:5]
	}
	decodeParts(t, ds, 0, rows, cuts, 1+rng.IntN(60000), mem, checkDemo12)
	if orc.PartSeeks() == seeks0 {
		t.Error("no part started at its row group")
	}
	if _, reseeks := orc.SeekCounts(); reseeks != reseeks0 {
		t.Errorf("%d parts could not be decoded from their row group and were read again whole", reseeks-reseeks0)
	}
}

// BenchmarkDemo12 reads demo-12 as the stream does: one fetch of the
// stripe, decoded in 30 parts of 64,027 rows.
//
//	go test ./formats/orc -run '^$' -bench Demo12 -cpuprofile cpu.out
func BenchmarkDemo12(b *testing.B) {
	ds := plan(b, []string{filepath.Join(orcExamples(b), "demo-12-zlib.orc")}, nil)
	rows := ds.Fragments[0].Rows
	var cuts []int64
	for c := int64(64027); c < rows; c += 64027 {
		cuts = append(cuts, c)
	}
	b.ReportAllocs()
	for b.Loop() {
		decodeParts(b, ds, 0, rows, cuts, 65536, memory.DefaultAllocator, func(arrow.RecordBatch, int64) error { return nil })
	}
	b.ReportMetric(float64(rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}

// TestSmallStripeFetchedOncePerPlan reads demo-12 as rank 0 of 2 with 8
// splits does (splits 0, 2, 4 and 6, at once, each in windows), checking
// every value: its one stripe of 45 KB, a block or few per stream, is
// fetched once for all of them, where each split fetched whole blocks of
// every stream before.
func TestSmallStripeFetchedOncePerPlan(t *testing.T) {
	var counter *storage.Counting
	opts := formats.PlanOptions{Formats: []formats.Format{orc.Format{}}}
	opts.Storage.Wrap = func(b storage.Bucket) storage.Bucket {
		counter = storage.NewCounting(b)
		return counter
	}
	path := filepath.Join(orcExamples(t), "demo-12-zlib.orc")
	ds, err := formats.Plan(context.Background(), []string{path}, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	planned := counter.Bytes()
	rows := ds.Fragments[0].Rows
	split := rows / 8
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	var g errgroup.Group
	for _, s := range []int64{0, 2, 4, 6} {
		g.Go(func() error {
			lo, hi := s*split, (s+1)*split
			for w := lo; w < hi; w += 60025 {
				at := w
				err := ds.Read(context.Background(), 0, ds.RowRange(0, w, min(w+60025, hi)), 8192, mem, func(b arrow.RecordBatch) error {
					defer b.Release()
					err := checkDemo12(b, at)
					at += b.NumRows()
					return err
				})
				if err != nil {
					return err
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	// The stripe ends where the file's tail, read by planning, begins.
	read := counter.Bytes() - planned
	if limit := st.Size() - 3; read > limit {
		t.Errorf("the reads of 4 splits fetched %d bytes of a file of %d", read, st.Size())
	}
	t.Logf("planning read %d bytes, the 4 splits %d, of a file of %d", planned, read, st.Size())
}
