package text

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/sluicedata/sluice/formats"
)

// quotedPastSample is a CSV file whose records hold quoted line ends only
// after the sample, each long enough to hold a byte-range cut, with lines
// inside that read as records of their own from the middle of the field.
func quotedPastSample() string {
	var sb strings.Builder
	sb.WriteString("id,s\n")
	id := 0
	for block := range 6 {
		for range 20 {
			fmt.Fprintf(&sb, "%d,plain%d\n", id, id)
			id++
		}
		sb.WriteString(fmt.Sprintf("%d,\"opens %d\n", id, block))
		for k := range 8 {
			fmt.Fprintf(&sb, "%d,fake%d\n", 9000+10*block+k, k)
		}
		sb.WriteString("closes\"\n")
		id++
	}
	return sb.String()
}

// TestQuotedLineEndPastSample reads each byte range of a file on its own,
// as ranks do, where quoted line ends lie past the sample at range cuts:
// no range may deliver a row that a read of the whole file does not, and
// together they deliver exactly its rows.
func TestQuotedLineEndPastSample(t *testing.T) {
	body := quotedPastSample()
	dir := write(t, map[string]string{"a.csv": body})
	schema := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "s", Type: arrow.BinaryTypes.String}}, nil)
	whole := mustRead(t, Options{Schema: schema}, nil, dir)
	truth := map[string]int{}
	for _, r := range whole.rows {
		truth[strings.Join(r, "|")]++
	}
	for _, unit := range []int64{37, 64, 100, 257} {
		for _, skip := range []BadRows{BadRowsError, BadRowsSkip} {
			o := Options{Schema: schema, SampleRecords: 5, UnitBytes: unit, BadRows: skip}
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			ds, err := formats.Plan(t.Context(), []string{dir}, formats.PlanOptions{Formats: All(o)})
			if err != nil {
				t.Fatal(err)
			}
			f := ds.Fragments[0]
			if len(f.Units) < 5 {
				t.Fatalf("unit %d: %d units, want the file cut", unit, len(f.Units))
			}
			got := map[string]int{}
			for u := range f.Units {
				err := ds.Read(t.Context(), 0, formats.Range{Start: -1, End: -1, FirstUnit: u, EndUnit: u + 1}, 7, mem, func(b arrow.RecordBatch) error {
					defer b.Release()
					for _, r := range rowsOf(b) {
						k := strings.Join(r, "|")
						if got[k]++; got[k] > truth[k] {
							t.Errorf("unit bytes %d, %v: range %d delivered %q, which the file does not hold", unit, skip, u, k)
						}
					}
					return nil
				})
				if err != nil && !errors.Is(err, formats.ErrCorrupt) {
					t.Fatal(err)
				}
				if err != nil {
					t.Errorf("unit bytes %d, %v: range %d: %v", unit, skip, u, err)
				}
			}
			ds.Close()
			mem.AssertSize(t, 0)
			for k, n := range truth {
				if got[k] != n {
					t.Errorf("unit bytes %d, %v: %q delivered %d times, want %d", unit, skip, k, got[k], n)
				}
			}
		}
	}
}

// TestCutsCached checks that the cuts a scan found come back from the plan
// cache unchanged, and that a file the scan cannot cut (a quote left open)
// is read whole, saying why.
func TestCutsCached(t *testing.T) {
	dir := write(t, map[string]string{"a.csv": quotedPastSample()})
	c := &formats.MemoryCache{}
	o := Options{SampleRecords: 5, UnitBytes: 64}
	plan := func() []formats.Unit {
		ds, err := formats.Plan(t.Context(), []string{dir}, formats.PlanOptions{Formats: All(o), Cache: c})
		if err != nil {
			t.Fatal(err)
		}
		defer ds.Close()
		return ds.Fragments[0].Units
	}
	first := plan()
	if c.Hits() != 0 || len(c.Keys()) == 0 {
		t.Fatalf("first plan: %d hits, %d entries", c.Hits(), len(c.Keys()))
	}
	again := plan()
	if c.Hits() == 0 || !reflect.DeepEqual(first, again) {
		t.Fatalf("cached plan: %d hits, units\n%v\nwant\n%v", c.Hits(), again, first)
	}
	// Every cut is a record start: the byte before it ends a line.
	body := quotedPastSample()
	for _, u := range first[1:] {
		if u.Offset < int64(len(body)) && body[u.Offset-1] != '\n' {
			t.Fatalf("cut at %d is not at a line start", u.Offset)
		}
	}

	open := write(t, map[string]string{"open.csv": strings.Repeat("a,b\n", 100) + "1,\"never closed\n" + strings.Repeat("3,4\n", 100)})
	ds, err := formats.Plan(t.Context(), []string{open}, formats.PlanOptions{Formats: All(Options{SampleRecords: 5, UnitBytes: 64, Quote: '"', Delimiter: ','})})
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	f := ds.Fragments[0]
	if len(f.Units) != 1 || !strings.Contains(Whole(f), "not closed") {
		t.Fatalf("%d units, Whole %q; want one unit and why", len(f.Units), Whole(f))
	}
}

// TestCutsQuoteFreeBlocks reads random CSV files cut into small ranges,
// with the quote-free scan's blocks made small enough to end anywhere (in
// a CRLF, in a long line, before the first quote): each range read on its
// own, the ranges together give what a read of the whole file gives.
func TestCutsQuoteFreeBlocks(t *testing.T) {
	defer func(b int) { quoteFreeBlock = b }(quoteFreeBlock)
	r := rand.New(rand.NewPCG(5, 6))
	ends := []string{"\n", "\r\n", "\r"}
	for trial := range 300 {
		var sb strings.Builder
		sb.WriteString("a,b\n")
		end := ends[r.IntN(3)]
		quoteAt := r.IntN(60) // the record from which quoted line ends may come
		for i := range 40 + r.IntN(40) {
			switch k := r.IntN(10); {
			case k == 0:
				sb.WriteString(end) // a blank line
			case k == 1:
				sb.WriteString("# comment" + end)
			case k == 2:
				fmt.Fprintf(&sb, "%d,%s%s", i, strings.Repeat("w", r.IntN(80)), end)
			case k == 3 && i >= quoteAt:
				fmt.Fprintf(&sb, "%d,\"q%s%d,x%sz\"%s", i, end, i, end, end)
			default:
				fmt.Fprintf(&sb, "%d,v%d%s", i, i, end)
			}
		}
		body := sb.String()
		dir := write(t, map[string]string{"a.csv": body})
		o := Options{Comment: '#', SampleRecords: 3, Schema: arrow.NewSchema([]arrow.Field{{Name: "a", Type: arrow.BinaryTypes.String}, {Name: "b", Type: arrow.BinaryTypes.String}}, nil)}
		want, err := readAll(t, o, nil, dir)
		quoteFreeBlock = 1 + r.IntN(64)
		o.UnitBytes = int64(1 + r.IntN(50))
		got, gotErr := readAll(t, o, nil, dir)
		if (err == nil) != (gotErr == nil) || (err == nil && got.String() != want.String()) {
			t.Fatalf("trial %d (block %d, unit %d): whole %v, cut %v\n%q\ngot\n%s\nwant\n%s", trial, quoteFreeBlock, o.UnitBytes, err, gotErr, body, got, want)
		}
	}
}
