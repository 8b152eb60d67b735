package formats_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/sluicedata/sluice/formats"
	"github.com/sluicedata/sluice/internal/testkit/arrowfile"
	"github.com/sluicedata/sluice/internal/testkit/faults"
)

// These tests drive the planner through internal/testkit/arrowfile, a driver that
// is not Parquet and can hide its row counts, so that what formats adds on
// top of a driver (masks, filters, live-row ranges, unit ranges) is checked
// apart from any one format's own reading.

// layout is the record batches of each file, by rows: empty batches and an
// empty file included, as writers produce them.
var layout = [][]int{
	{7, 0, 13, 1, 20},
	{},
	{0, 0, 5},
	{31},
	{3, 9, 0, 0, 12, 2},
}

// writeLayout writes one IPC file per entry of files, ids numbering the
// rows of all files in order, and returns the directory and the row count.
func writeLayout(t testing.TB, files [][]int) (string, int64) {
	t.Helper()
	dir := t.TempDir()
	var id int64
	for i, batches := range files {
		if err := arrowfile.WriteFile(filepath.Join(dir, fmt.Sprintf("part-%02d.arrow", i)), id, batches); err != nil {
			t.Fatal(err)
		}
		for _, n := range batches {
			id += int64(n)
		}
	}
	return dir, id
}

// fileIDs returns the ids each file holds, as written.
func fileIDs(files [][]int) [][]int64 {
	out := make([][]int64, len(files))
	var id int64
	for i, batches := range files {
		out[i] = []int64{}
		for _, n := range batches {
			for range n {
				out[i] = append(out[i], id)
				id++
			}
		}
	}
	return out
}

// checkedMem returns an allocator the test checks is empty at its end.
func checkedMem(t testing.TB) *memory.CheckedAllocator {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	t.Cleanup(func() { mem.AssertSize(t, 0) })
	return mem
}

func planArrow(t testing.TB, dir string, hide bool, o formats.PlanOptions) *formats.Scan {
	t.Helper()
	o.Formats = []formats.Format{arrowfile.Format{HideCounts: hide}}
	d, err := formats.Plan(context.Background(), []string{dir}, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// readIDs reads range r of fragment i and returns the id column and the
// batches' row counts. It fails the test on an error.
func readIDs(t testing.TB, d *formats.Scan, i int, r formats.Range, batchRows int, mem memory.Allocator) ([]int64, []int64) {
	t.Helper()
	ids, sizes, err := tryRead(d, i, r, batchRows, mem)
	if err != nil {
		t.Fatal(err)
	}
	return ids, sizes
}

func tryRead(d *formats.Scan, i int, r formats.Range, batchRows int, mem memory.Allocator) ([]int64, []int64, error) {
	ids, sizes := []int64{}, []int64{}
	col := slices.Index(d.Columns, "id")
	err := d.Read(context.Background(), i, r, batchRows, mem, func(b arrow.RecordBatch) error {
		defer b.Release()
		if !b.Schema().Equal(d.Schema) {
			return fmt.Errorf("batch schema %s, want %s", b.Schema(), d.Schema)
		}
		sizes = append(sizes, b.NumRows())
		if col >= 0 {
			ids = append(ids, b.Column(col).(*array.Int64).Int64Values()...)
		}
		return nil
	})
	return ids, sizes, err
}

// whole is the range of all of fragment i, by rows where its count is known
// and by units where it is not.
func whole(d *formats.Scan, i int) formats.Range {
	f := d.Fragments[i]
	if f.Rows >= 0 {
		return d.RowRange(i, 0, f.Rows)
	}
	return formats.Range{Start: -1, End: -1, FirstUnit: 0, EndUnit: len(f.Units)}
}

// Plan and Read give exactly the written rows, whether the driver tells the
// counts or not; with unknown counts every unit range reads its batch.
func TestReadKnownAndUnknownCounts(t *testing.T) {
	dir, total := writeLayout(t, layout)
	want := fileIDs(layout)
	for _, hide := range []bool{false, true} {
		t.Run(fmt.Sprintf("hide=%t", hide), func(t *testing.T) {
			mem := checkedMem(t)
			d := planArrow(t, dir, hide, formats.PlanOptions{Columns: []string{"id", "s"}})
			if len(d.Fragments) != len(layout) {
				t.Fatalf("%d fragments, want %d", len(d.Fragments), len(layout))
			}
			wantRows := total
			if hide {
				wantRows = -1
			}
			if got := d.Rows(); got != wantRows {
				t.Fatalf("Rows() = %d, want %d", got, wantRows)
			}
			for i, f := range d.Fragments {
				if f.Format != "arrow" || len(f.Units) != len(layout[i]) {
					t.Fatalf("%s: format %q, %d units, want arrow and %d", f.Rel, f.Format, len(f.Units), len(layout[i]))
				}
				for u, unit := range f.Units {
					wantUnit := int64(layout[i][u])
					if hide {
						wantUnit = -1
					}
					if unit.Rows != wantUnit {
						t.Fatalf("%s unit %d: Rows %d, want %d", f.Rel, u, unit.Rows, wantUnit)
					}
					if layout[i][u] > 0 && unit.Bytes <= 0 {
						t.Fatalf("%s unit %d: Bytes %d for %d rows", f.Rel, u, unit.Bytes, layout[i][u])
					}
				}
				// A small batch size cuts the driver's batches.
				ids, sizes := readIDs(t, d, i, whole(d, i), 4, mem)
				if !slices.Equal(ids, want[i]) {
					t.Fatalf("%s: read %v, want %v", f.Rel, ids, want[i])
				}
				if len(sizes) > 0 && slices.Max(sizes) > 4 {
					t.Fatalf("%s: batches of %v rows, want at most 4", f.Rel, sizes)
				}
				// Each unit alone holds its batch's rows.
				var at int
				for u, n := range layout[i] {
					r := formats.Range{Start: -1, End: -1, FirstUnit: u, EndUnit: u + 1}
					if !hide {
						r = formats.Range{Start: int64(at), End: int64(at + n), FirstUnit: u, EndUnit: u + 1}
					}
					ids, _ := readIDs(t, d, i, r, 0, mem)
					if !slices.Equal(ids, want[i][at:at+n]) {
						t.Fatalf("%s unit %d: read %v, want %v", f.Rel, u, ids, want[i][at:at+n])
					}
					at += n
				}
			}
		})
	}
}

// Reads of random row ranges (through RowRange, and through one Fetch of a
// wider range split into Parts) give the rows a naive slice does.
func TestRandomRowRanges(t *testing.T) {
	dir, _ := writeLayout(t, layout)
	want := fileIDs(layout)
	mem := checkedMem(t)
	d := planArrow(t, dir, false, formats.PlanOptions{Columns: []string{"s", "id"}})
	r := rand.New(rand.NewPCG(5, 6))
	for range 300 {
		i := r.IntN(len(layout))
		n := int64(len(want[i]))
		s := r.Int64N(n + 1)
		e := s + r.Int64N(n-s+1)
		ids, _ := readIDs(t, d, i, d.RowRange(i, s, e), 1+r.IntN(9), mem)
		if !slices.Equal(ids, want[i][s:e]) {
			t.Fatalf("%s rows [%d, %d): read %v, want %v", d.Fragments[i].Rel, s, e, ids, want[i][s:e])
		}
		// The same rows as a part of a fetch of the whole file.
		fe, err := d.Fetch(context.Background(), i, whole(d, i))
		if err != nil {
			t.Fatal(err)
		}
		part, err := fe.Part(d.RowRange(i, s, e))
		if err != nil {
			t.Fatal(err)
		}
		var got []int64
		_, err = d.Decode(context.Background(), part, 0, mem, func(b arrow.RecordBatch) error {
			defer b.Release()
			got = append(got, b.Column(1).(*array.Int64).Int64Values()...)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want[i][s:e]) {
			t.Fatalf("%s part rows [%d, %d): read %v, want %v", d.Fragments[i].Rel, s, e, got, want[i][s:e])
		}
	}
}

// randomMask masks about a third of a file's rows.
func randomMask(r *rand.Rand, rows int) *formats.RowMask {
	m := &formats.RowMask{Deleted: []int64{}}
	for row := range rows {
		if r.IntN(3) == 0 {
			m.Deleted = append(m.Deleted, int64(row))
		}
	}
	return m
}

// A row mask leaves out exactly its rows: units and fragments count live
// rows, and row ranges are in live rows, checked against a naive list of
// the live rows over random masks and ranges.
func TestRowMask(t *testing.T) {
	files := [][]int{{7, 0, 13, 1, 20}, {0, 0, 5}, {3, 9, 0, 0, 12, 2}, {40}}
	dir, _ := writeLayout(t, files)
	written := fileIDs(files)
	mem := checkedMem(t)
	r := rand.New(rand.NewPCG(7, 8))
	urls := planArrow(t, dir, false, formats.PlanOptions{})
	for trial := range 40 {
		masks := map[string]*formats.RowMask{}
		live := make([][]int64, len(files))
		unitOf := make([][]int, len(files)) // the unit of each live row
		liveUnits := make([][]int64, len(files))
		for i, f := range urls.Fragments {
			m := randomMask(r, len(written[i]))
			switch trial {
			case 0:
				m.Deleted = nil // a mask that masks nothing
			case 1:
				m.Deleted = m.Deleted[:0]
				for row := range len(written[i]) {
					m.Deleted = append(m.Deleted, int64(row)) // every row
				}
			}
			masks[f.URL] = m
			var row int
			for u, n := range files[i] {
				liveUnits[i] = append(liveUnits[i], 0)
				for range n {
					if !slices.Contains(m.Deleted, int64(row)) {
						live[i] = append(live[i], written[i][row])
						unitOf[i] = append(unitOf[i], u)
						liveUnits[i][u]++
					}
					row++
				}
			}
		}
		d := planArrow(t, dir, false, formats.PlanOptions{Masks: masks, Columns: []string{"id"}})
		var total int64
		for i, f := range d.Fragments {
			total += int64(len(live[i]))
			if f.Rows != int64(len(live[i])) {
				t.Fatalf("trial %d %s: Rows %d, want %d live rows", trial, f.Rel, f.Rows, len(live[i]))
			}
			for u, unit := range f.Units {
				if unit.Rows != liveUnits[i][u] {
					t.Fatalf("trial %d %s unit %d: Rows %d, want %d live rows", trial, f.Rel, u, unit.Rows, liveUnits[i][u])
				}
			}
			ids, _ := readIDs(t, d, i, whole(d, i), 1+r.IntN(10), mem)
			if !slices.Equal(ids, live[i]) {
				t.Fatalf("trial %d %s: read %v, want the live rows %v", trial, f.Rel, ids, live[i])
			}
			for range 10 {
				n := int64(len(live[i]))
				s := r.Int64N(n + 1)
				e := s + r.Int64N(n-s+1)
				rng := d.RowRange(i, s, e)
				if e > s && (rng.FirstUnit != unitOf[i][s] || rng.EndUnit != unitOf[i][e-1]+1) {
					t.Fatalf("trial %d %s live rows [%d, %d): units [%d, %d), want [%d, %d)", trial, f.Rel, s, e, rng.FirstUnit, rng.EndUnit, unitOf[i][s], unitOf[i][e-1]+1)
				}
				ids, _ := readIDs(t, d, i, rng, 1+r.IntN(10), mem)
				if !slices.Equal(ids, live[i][s:e]) {
					t.Fatalf("trial %d %s live rows [%d, %d): read %v, want %v", trial, f.Rel, s, e, ids, live[i][s:e])
				}
			}
		}
		if d.Rows() != total {
			t.Fatalf("trial %d: dataset Rows %d, want %d", trial, d.Rows(), total)
		}
	}
}

// modFilter keeps the rows whose column col is a multiple of mod.
type modFilter struct {
	col string
	mod int64
	mem memory.Allocator
}

func (m modFilter) Columns() []string { return []string{m.col} }
func (m modFilter) String() string    { return fmt.Sprintf("%s %% %d == 0", m.col, m.mod) }

func (m modFilter) Keep(_ context.Context, b arrow.RecordBatch) (*array.Boolean, error) {
	idx := b.Schema().FieldIndices(m.col)
	if len(idx) == 0 {
		return nil, fmt.Errorf("no column %q in %s", m.col, b.Schema())
	}
	vals := b.Column(idx[0]).(*array.Int64).Int64Values()
	bld := array.NewBooleanBuilder(m.mem)
	defer bld.Release()
	for _, v := range vals {
		bld.Append(v%m.mod == 0)
	}
	return bld.NewBooleanArray(), nil
}

// A filter keeps exactly the passing rows and makes counts unknown; a
// column it reads that Columns does not select is read but not returned.
// With a mask too, both apply.
func TestFilter(t *testing.T) {
	dir, _ := writeLayout(t, layout)
	written := fileIDs(layout)
	for _, tc := range []struct {
		name    string
		columns []string
		hide    bool
		mask    bool
	}{
		{"filter column selected", []string{"id", "s"}, false, false},
		{"filter column not selected", []string{"s", "label"}, false, false},
		{"unknown counts", []string{"s"}, true, false},
		{"all columns", nil, false, false},
		{"with a mask", []string{"s"}, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := checkedMem(t)
			o := formats.PlanOptions{Columns: tc.columns, Filter: modFilter{"id", 3, mem}}
			deleted := map[int64]bool{}
			if tc.mask {
				// Mask every fifth row of every file.
				o.Masks = map[string]*formats.RowMask{}
				for i, f := range planArrow(t, dir, false, formats.PlanOptions{}).Fragments {
					m := &formats.RowMask{}
					for row := int64(0); row < int64(len(written[i])); row += 5 {
						m.Deleted = append(m.Deleted, row)
						deleted[written[i][row]] = true
					}
					o.Masks[f.URL] = m
				}
			}
			d := planArrow(t, dir, tc.hide, o)
			want := tc.columns
			if want == nil {
				for _, f := range arrowfile.Schema.Fields() {
					want = append(want, f.Name)
				}
			}
			if !slices.Equal(d.Columns, want) || d.Schema.NumFields() != len(want) {
				t.Fatalf("Columns %v, schema %s; want %v", d.Columns, d.Schema, want)
			}
			if d.Rows() != -1 {
				t.Fatalf("Rows() = %d behind a filter, want -1", d.Rows())
			}
			sCol := slices.Index(d.Columns, "s")
			for i, f := range d.Fragments {
				if f.Rows != -1 {
					t.Fatalf("%s: Rows %d behind a filter, want -1", f.Rel, f.Rows)
				}
				for u, unit := range f.Units {
					if unit.Rows != -1 {
						t.Fatalf("%s unit %d: Rows %d behind a filter, want -1", f.Rel, u, unit.Rows)
					}
				}
				var wantS []string
				for _, id := range written[i] {
					if id%3 == 0 && !deleted[id] {
						wantS = append(wantS, strconv.FormatInt(id, 10))
					}
				}
				// Read unit by unit, as a stream does where counts are unknown.
				var gotS []string
				for u := range f.Units {
					err := d.Read(context.Background(), i, formats.Range{Start: -1, End: -1, FirstUnit: u, EndUnit: u + 1}, 3, mem, func(b arrow.RecordBatch) error {
						defer b.Release()
						if !b.Schema().Equal(d.Schema) {
							return fmt.Errorf("batch schema %s, want %s", b.Schema(), d.Schema)
						}
						if b.NumRows() == 0 {
							return errors.New("an empty batch was delivered")
						}
						s := b.Column(sCol).(*array.String)
						for k := range s.Len() {
							gotS = append(gotS, s.Value(k))
						}
						return nil
					})
					if err != nil {
						t.Fatal(err)
					}
				}
				if !slices.Equal(gotS, wantS) {
					t.Fatalf("%s: read %v, want %v", f.Rel, gotS, wantS)
				}
			}
		})
	}
}

// Bad masks, masks where counts are unknown, a filter on a missing column
// and ranges outside a file are errors that say what is wrong and where.
func TestBadInputs(t *testing.T) {
	dir, _ := writeLayout(t, [][]int{{4, 6}})
	url := planArrow(t, dir, false, formats.PlanOptions{}).Fragments[0].URL
	mask := func(rows ...int64) map[string]*formats.RowMask {
		return map[string]*formats.RowMask{url: {Deleted: rows}}
	}
	for _, tc := range []struct {
		name string
		hide bool
		o    formats.PlanOptions
		want []string // in the error
		is   error
	}{
		{"mask past the end", false, formats.PlanOptions{Masks: mask(3, 10)}, []string{url, "outside the file's 10"}, nil},
		{"mask negative", false, formats.PlanOptions{Masks: mask(-1, 3)}, []string{url, "outside"}, nil},
		{"mask unsorted", false, formats.PlanOptions{Masks: mask(5, 3)}, []string{url, "ascending"}, nil},
		{"mask repeated", false, formats.PlanOptions{Masks: mask(3, 3)}, []string{url, "unique"}, nil},
		{"mask on unknown counts", true, formats.PlanOptions{Masks: mask(3)}, []string{url, "exact row counts"}, nil},
		{"filter on a missing column", false, formats.PlanOptions{Columns: []string{"id"}, Filter: modFilter{"nope", 2, memory.DefaultAllocator}}, []string{"filter", `"nope"`}, formats.ErrSchema},
		{"filter on a missing column, all columns", false, formats.PlanOptions{Filter: modFilter{"nope", 2, memory.DefaultAllocator}}, []string{"filter", `"nope"`}, formats.ErrSchema},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.o.Formats = []formats.Format{arrowfile.Format{HideCounts: tc.hide}}
			d, err := formats.Plan(context.Background(), []string{dir}, tc.o)
			if err == nil {
				d.Close()
				t.Fatal("Plan succeeded")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("error %q is not %v", err, tc.is)
			}
		})
	}

	mem := checkedMem(t)
	known := planArrow(t, dir, false, formats.PlanOptions{})
	unknown := planArrow(t, dir, true, formats.PlanOptions{})
	for _, tc := range []struct {
		name string
		d    *formats.Scan
		r    formats.Range
	}{
		{"rows past the end", known, known.RowRange(0, 5, 11)},
		{"rows reversed", known, formats.Range{Start: 6, End: 5, FirstUnit: 1, EndUnit: 2}},
		{"units past the end", unknown, formats.Range{Start: -1, End: -1, FirstUnit: 1, EndUnit: 3}},
		{"units reversed", unknown, formats.Range{Start: -1, End: -1, FirstUnit: 2, EndUnit: 1}},
		{"half a row range", unknown, formats.Range{Start: -1, End: 4, FirstUnit: 0, EndUnit: 1}},
	} {
		_, _, err := tryRead(tc.d, 0, tc.r, 0, mem)
		if err == nil || !strings.Contains(err.Error(), url) {
			t.Errorf("%s: read %v: got %v, want an error naming %s", tc.name, tc.r, err, url)
		}
	}
}

// A file that is not an IPC file, or whose batches changed after planning,
// is ErrCorrupt naming the file (and the batch).
func TestCorruptFiles(t *testing.T) {
	dir, _ := writeLayout(t, [][]int{{4, 6}})
	bad := filepath.Join(dir, "zz.arrow")
	if err := os.WriteFile(bad, []byte("not an arrow file at all, but long enough"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := formats.Plan(context.Background(), []string{dir}, formats.PlanOptions{Formats: []formats.Format{arrowfile.Format{}}})
	if !errors.Is(err, formats.ErrCorrupt) || !strings.Contains(err.Error(), "zz.arrow") {
		t.Fatalf("got %v, want ErrCorrupt naming zz.arrow", err)
	}

	mem := checkedMem(t)
	path := filepath.Join(dir, "part-00.arrow")
	d := planArrow(t, path, false, formats.PlanOptions{})
	// Rewritten with the same size but other batches, and its modification
	// time put back, so that storage cannot tell: the driver's read notices.
	planned, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := arrowfile.WriteFile(path, 0, []int{6, 4}); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(path, planned.ModTime(), planned.ModTime()); err != nil {
		t.Fatal(err)
	}
	_, _, err = tryRead(d, 0, d.RowRange(0, 0, 10), 0, mem)
	if !errors.Is(err, formats.ErrCorrupt) || !strings.Contains(err.Error(), "part-00.arrow") || !strings.Contains(err.Error(), "batch 0") {
		t.Fatalf("got %v, want ErrCorrupt naming part-00.arrow and batch 0", err)
	}
	// Where the rewrite moved the time, as rewrites do, storage refuses the
	// read first: the file is not the one planned.
	rewritten, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := faults.RewriteFile(path, rewritten); err != nil {
		t.Fatal(err)
	}
	_, _, err = tryRead(d, 0, d.RowRange(0, 0, 10), 0, mem)
	if !errors.Is(err, formats.ErrChanged) || !strings.Contains(err.Error(), "part-00.arrow") {
		t.Fatalf("got %v, want ErrChanged naming part-00.arrow", err)
	}
}
