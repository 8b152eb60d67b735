package text

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/sluicedata/sluice/formats"
)

// badRowsFile is a CSV file of n records, every seventh of which does not
// fit (a word for a number, a missing field), and the number of those.
func badRowsFile(n int) (string, int64) {
	var sb strings.Builder
	sb.WriteString("id,x\n")
	var bad int64
	for i := range n {
		switch {
		case i%7 == 3:
			fmt.Fprintf(&sb, "%d,oops\n", i)
			bad++
		case i%7 == 5 && i%2 == 0:
			fmt.Fprintf(&sb, "%d\n", i)
			bad++
		default:
			fmt.Fprintf(&sb, "%d,%d.5\n", i, i)
		}
	}
	// Bad records after the last good one, which a read in rows meets
	// only past its last row.
	sb.WriteString("x,y\nz\n")
	return sb.String(), bad + 2
}

// TestSkippedReported checks that the reads of a file report each skipped
// row once between them (Read.Skipped through Decode): by whole
// units where counts are unknown, and by rows cut anywhere, across units,
// where the counting pass knows them.
func TestSkippedReported(t *testing.T) {
	body, bad := badRowsFile(3000)
	dir := write(t, map[string]string{"a.csv": body})
	schema := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "x", Type: arrow.PrimitiveTypes.Float64}}, nil)
	for _, count := range []bool{false, true} {
		t.Run(fmt.Sprintf("count=%t", count), func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			o := Options{Schema: schema, BadRows: BadRowsSkip, UnitBytes: 1500, Count: count}
			ds, err := formats.Plan(t.Context(), []string{dir}, formats.PlanOptions{Formats: All(o)})
			if err != nil {
				t.Fatal(err)
			}
			defer ds.Close()
			f := ds.Fragments[0]
			if len(f.Units) < 10 {
				t.Fatalf("%d units, want the file cut", len(f.Units))
			}
			read := func(r formats.Range) (rows, skipped int64) {
				fe, err := ds.Fetch(t.Context(), 0, r)
				if err != nil {
					t.Fatal(err)
				}
				skipped, err = ds.Decode(t.Context(), fe, 64, mem, func(b arrow.RecordBatch) error {
					rows += b.NumRows()
					b.Release()
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
				return rows, skipped
			}
			good := int64(3000) - (bad - 2)
			if !count {
				var rows, skipped int64
				for u := range f.Units {
					n, k := read(formats.Range{Start: -1, End: -1, FirstUnit: u, EndUnit: u + 1})
					rows, skipped = rows+n, skipped+k
				}
				if rows != good || skipped != bad {
					t.Fatalf("units: %d rows, %d skipped; want %d and %d", rows, skipped, good, bad)
				}
				return
			}
			if f.Rows != good {
				t.Fatalf("counted %d rows, want %d", f.Rows, good)
			}
			rng := rand.New(rand.NewPCG(1, 2))
			for trial := range 20 {
				// Cut the file's rows at random places, some inside units.
				var rows, skipped int64
				for at := int64(0); at < good; {
					end := min(good, at+1+rng.Int64N(400))
					n, k := read(ds.RowRange(0, at, end))
					rows, skipped = rows+n, skipped+k
					at = end
				}
				if rows != good || skipped != bad {
					t.Fatalf("trial %d: %d rows, %d skipped; want %d and %d", trial, rows, skipped, good, bad)
				}
			}
		})
	}
}
