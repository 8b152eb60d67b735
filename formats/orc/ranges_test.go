package orc_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/sluicedata/sluice/formats"
	"github.com/sluicedata/sluice/formats/orc"
)

// readRange reads rows [lo, hi) of fragment 0 into one array per column.
func readRange(t testing.TB, ds *formats.Scan, lo, hi int64, batchRows int, mem memory.Allocator) []arrow.Array {
	t.Helper()
	parts := make([][]arrow.Array, ds.Schema.NumFields())
	err := ds.Read(context.Background(), 0, ds.RowRange(0, lo, hi), batchRows, mem, func(b arrow.RecordBatch) error {
		defer b.Release()
		if b.NumRows() > int64(batchRows) {
			t.Errorf("a batch of %d rows, more than %d", b.NumRows(), batchRows)
		}
		for i, c := range b.Columns() {
			c.Retain()
			parts[i] = append(parts[i], c)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("rows [%d, %d): %v", lo, hi, err)
	}
	out := make([]arrow.Array, len(parts))
	for i, p := range parts {
		if len(p) == 0 {
			out[i] = array.MakeArrayOfNull(mem, ds.Schema.Field(i).Type, 0)
			continue
		}
		c, err := array.Concatenate(p, mem)
		if err != nil {
			// arrow-go does not concatenate unions: compare their text.
			b := array.NewStringBuilder(mem)
			for _, a := range p {
				for i := range a.Len() {
					b.Append(fmt.Sprint(a.GetOneForMarshal(i)))
				}
			}
			c = b.NewArray()
			b.Release()
		}
		for _, a := range p {
			a.Release()
		}
		out[i] = c
	}
	return out
}

func release(as []arrow.Array) {
	for _, a := range as {
		a.Release()
	}
}

// TestRangesMatchWholeRead: any row range, cut anywhere in a stripe and
// so started at a row group by the row index, reads the same rows as the
// same range of a whole read.
func TestRangesMatchWholeRead(t *testing.T) {
	defer seeksHeld(t)()
	againstWholeRead(t, seekFiles, 12, func(t *testing.T, ds *formats.Scan, whole []arrow.Array, rng *rand.Rand, mem memory.Allocator) {
		rows := ds.Fragments[0].Rows
		for range 6 {
			lo := rng.Int64N(rows)
			hi := lo + 1 + rng.Int64N(min(rows-lo, 30000))
			got := readRange(t, ds, lo, hi, 1+rng.IntN(3000), mem)
			for c := range got {
				want := array.NewSlice(whole[c], lo, hi)
				if !array.Equal(want, got[c]) {
					t.Errorf("rows [%d, %d) column %q differ from the whole read's", lo, hi, ds.Schema.Field(c).Name)
				}
				want.Release()
			}
			release(got)
		}
	})
}

// seekFiles are example files with stripes of several row groups, of
// every codec, nulls, strings, timestamps and unions (and one without a
// row index).
var seekFiles = []string{"TestOrcFile.testSeek", "TestStringDictionary.testRowIndex", "over1k_bloom",
	"nulls-at-end-snappy", "TestOrcFile.testDate1900", "TestVectorOrcFile.testLz4", "TestVectorOrcFile.testLzo",
	"TestOrcFile.testUnionAndTimestamp", "orc_split_elim", "TestOrcFile.testWithoutIndex", "TestVectorOrcFile.testZstd.0.12"}

// againstWholeRead calls check for each example file of files (the first
// three under -short), planned and read whole into one array per column,
// with a generator seeded by seed and the file's rows.
func againstWholeRead(t *testing.T, files []string, seed uint64, check func(t *testing.T, ds *formats.Scan, whole []arrow.Array, rng *rand.Rand, mem memory.Allocator)) {
	examples := orcExamples(t)
	if testing.Short() {
		files = files[:3]
	}
	for _, name := range files {
		t.Run(name, func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			ds := plan(t, []string{filepath.Join(examples, name+".orc")}, nil)
			rows := ds.Fragments[0].Rows
			whole := readRange(t, ds, 0, rows, 4096, mem)
			defer release(whole)
			check(t, ds, whole, rand.New(rand.NewPCG(uint64(rows), seed)), mem)
		})
	}
}

// TestCutStripeFetchesPart: a read of the last rows of a stripe with a row
// index fetches a part of its streams, and the two halves of a stripe cut
// in the middle fetch about the stripe once.
func TestCutStripeFetchesPart(t *testing.T) {
	examples := orcExamples(t)
	ds := plan(t, []string{filepath.Join(examples, "TestOrcFile.testSeek.orc")}, nil)
	f := ds.Fragments[0]
	if !f.Units[0].Paged {
		t.Fatal("a file with a row index should have paged units")
	}
	n := f.Units[0].Rows
	fetch := func(lo, hi int64) int64 {
		fe, err := ds.Fetch(context.Background(), 0, ds.RowRange(0, lo, hi))
		if err != nil {
			t.Fatal(err)
		}
		return fe.Bytes
	}
	// Its streams are a compression block or two each: a part of the
	// stripe fetches whole blocks.
	whole := fetch(0, n)
	tail := fetch(n-10, n)
	if tail*10 > whole*9 {
		t.Errorf("the last 10 rows of a stripe of %d fetch %d bytes of the stripe's %d", n, tail, whole)
	}
	t.Logf("stripe of %d rows: whole %d, last 10 rows %d", n, whole, tail)
}

// seeksHeld returns a check that reads started at a row group since the
// call, and that none of them had to be read again whole: what the row
// index said was enough.
func seeksHeld(t *testing.T) func() {
	seeks0, reseeks0 := orc.SeekCounts()
	return func() {
		seeks, reseeks := orc.SeekCounts()
		if seeks == seeks0 {
			t.Error("no read started at a row group")
		}
		if reseeks != reseeks0 {
			t.Errorf("%d of %d reads that started at a row group were read again whole", reseeks-reseeks0, seeks-seeks0)
		}
		t.Logf("%d reads started at a row group", seeks-seeks0)
	}
}
