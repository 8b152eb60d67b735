package formatstest

import (
	"context"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"golang.org/x/sync/errgroup"

	"github.com/sluicedata/sluice/filter"
	"github.com/sluicedata/sluice/formats"
)

// testSchema: the table planned has Schema's columns (less Lacks), of its
// types and nullability, so that the same columns written in any format
// are the same Arrow schema and datasets of several formats mix. Field
// metadata (a Parquet field id, an Iceberg one) is the driver's own.
func (s *suite) testSchema(t *testing.T) {
	_, scan := s.write(t, []int64{300}, formats.PlanOptions{})
	got := scan.Schema
	t.Logf("%s plans the table as %s", s.name, got)
	if got.NumFields() != len(s.columns) {
		t.Errorf("%s: the table plans as %d columns (%s), want %d", s.name, got.NumFields(), got, len(s.columns))
	}
	for _, name := range s.columns {
		want := Schema.Field(Schema.FieldIndices(name)[0])
		idx := got.FieldIndices(name)
		if len(idx) != 1 {
			t.Errorf("%s: %d columns %q planned, want 1", s.name, len(idx), name)
			continue
		}
		f := got.Field(idx[0])
		if !arrow.TypeEqual(f.Type, want.Type) || f.Nullable != want.Nullable {
			t.Errorf("%s: column %q plans as %s (nullable %v), want %s (nullable %v) as every driver gives it", s.name, name, f.Type, f.Nullable, want.Type, want.Nullable)
		}
	}
}

// testExactlyOnce: every fragment fetched at once and decoded in another
// order, on many goroutines, delivers each row of its file once, in file
// order, with the values written; and Read, Fetch and Decode in one step,
// delivers the same.
func (s *suite) testExactlyOnce(t *testing.T) {
	ctx := context.Background()
	ds, scan := s.write(t, fileRows(), formats.PlanOptions{})
	mem := checkedMem(t)
	s.checkCounts(t, scan)
	for _, f := range scan.Fragments {
		t.Logf("%s: %d rows in %d units", f.URL, f.Rows, len(f.Units))
	}
	n := len(scan.Fragments)
	fetched := make([]*formats.Fetched, n)
	defer func() {
		for _, fe := range fetched {
			fe.Release()
		}
	}()
	var g errgroup.Group
	for i := range n {
		g.Go(func() (err error) {
			fetched[i], err = scan.Fetch(ctx, i, whole(scan, i))
			return err
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatalf("%s: %v", s.name, err)
	}
	got := make([][]row, n)
	for i := n - 1; i >= 0; i-- {
		g.Go(func() error {
			rows, skipped, err := s.decode(ctx, scan, fetched[i], 97, mem)
			if err == nil && skipped != 0 {
				t.Errorf("%s: %s: %d rows of a file as written reported skipped", s.name, scan.Fragments[i].URL, skipped)
			}
			got[i] = rows
			return err
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatalf("%s: %v", s.name, err)
	}
	for i, rows := range got {
		f := scan.Fragments[i]
		s.checkFragment(t, ds, f, rows)
		again, err := s.readAll(ctx, scan, i, mem)
		if err != nil {
			t.Fatalf("%s: Read: %v", s.name, err)
		}
		s.checkRows(t, f.URL+": Read", again, ids(rows))
	}
	s.checkOnce(t, ds, got)
	if r := scan.Rows(); r >= 0 && r != int64(len(ds.live())) {
		t.Errorf("%s: the scan counts %d rows, and holds %d", s.name, r, len(ds.live()))
	}
}

// readAll reads fragment i whole with Scan.Read.
func (s *suite) readAll(ctx context.Context, scan *formats.Scan, i int, mem memory.Allocator) ([]row, error) {
	var rows []row
	err := scan.Read(ctx, i, whole(scan, i), 1000, mem, func(b arrow.RecordBatch) error {
		defer b.Release()
		got, err := s.rows(b)
		rows = append(rows, got...)
		return err
	})
	return rows, err
}

// checkCounts: where a fragment knows its rows, its units hold them.
func (s *suite) checkCounts(t *testing.T, scan *formats.Scan) {
	t.Helper()
	for _, f := range scan.Fragments {
		var sum int64
		known := true
		for u, unit := range f.Units {
			if unit.Rows < 0 {
				known = false
			}
			sum += max(unit.Rows, 0)
			if unit.Bytes < 0 || unit.Decoded < 0 {
				t.Errorf("%s: %s: unit %d has %d bytes, %d decoded", s.name, f.URL, u, unit.Bytes, unit.Decoded)
			}
		}
		if f.Rows >= 0 && (!known || sum != f.Rows) {
			t.Errorf("%s: %s counts %d rows, its units %d (all known: %v)", s.name, f.URL, f.Rows, sum, known)
		}
	}
}

// checkFragment: a whole read of f gives the rows of its file in file
// order, less those gone, as many as it counts.
func (s *suite) checkFragment(t *testing.T, ds *dataset, f *formats.Fragment, rows []row) {
	t.Helper()
	if f.Rows >= 0 && int64(len(rows)) != f.Rows {
		t.Errorf("%s: %s counts %d rows and delivers %d", s.name, f.URL, f.Rows, len(rows))
	}
	got := ids(rows)
	if !slices.IsSorted(got) {
		t.Fatalf("%s: %s: rows out of file order: %s", s.name, f.URL, span(got))
	}
	s.checkValues(t, f.URL, rows)
	if i := ds.fileOf(f); i >= 0 {
		var want []int64
		for _, id := range ds.ids[i] {
			if !ds.gone[id] {
				want = append(want, id)
			}
		}
		s.checkRows(t, f.URL, rows, want)
	}
}

// checkOnce: the fragments' rows together are the dataset's, each once.
func (s *suite) checkOnce(t *testing.T, ds *dataset, got [][]row) {
	t.Helper()
	seen := map[int64]int{}
	for _, rows := range got {
		for _, r := range rows {
			seen[r.id]++
		}
	}
	var missing, extra []int64
	for id := range ds.live() {
		if seen[id] != 1 {
			missing = append(missing, id)
		}
	}
	for id, n := range seen {
		if n > 1 || !ds.live()[id] {
			extra = append(extra, id)
		}
	}
	slices.Sort(missing)
	slices.Sort(extra)
	if len(missing) > 0 || len(extra) > 0 {
		t.Fatalf("%s: not exactly once: rows not delivered once %s; delivered but not the dataset's once %s", s.name, span(missing), span(extra))
	}
}

// testCuts: reads of every unit alone, of runs of units, and of row
// ranges cut at every unit boundary, a row either side and at random rows,
// deliver exactly the rows of a whole read from those ranges, values and
// all, before and after FindPages; so do parts of one fetch, decoded after
// it is released.
func (s *suite) testCuts(t *testing.T) {
	ds, scan := s.write(t, fileRows(), formats.PlanOptions{})
	mem := checkedMem(t)
	for i := range scan.Fragments {
		full := s.mustRead(t, scan, i, whole(scan, i), 8192, mem)
		s.checkFragment(t, ds, scan.Fragments[i], full)
		s.cutUnits(t, scan, i, full, mem)
		s.cutRows(t, scan, i, full, mem)
		// Once a driver that can find its pages ahead of reading
		// (formats.PageFinder) has, as streams have it at plan time for
		// the units a split cuts, the cuts read by those pages.
		for u := range scan.Fragments[i].Units {
			if err := scan.FindPages(context.Background(), i, u); err != nil {
				t.Fatalf("%s: FindPages(%d, %d): %v", s.name, i, u, err)
			}
		}
		s.cutRows(t, scan, i, full, mem)
	}
}

// mustRead reads range r of fragment i, failing t on an error.
func (s *suite) mustRead(t *testing.T, scan *formats.Scan, i int, r formats.Range, batchRows int, mem memory.Allocator) []row {
	t.Helper()
	rows, _, err := s.read(context.Background(), scan, i, r, batchRows, mem)
	if err != nil {
		t.Fatalf("%s: fragment %d, %v: %v", s.name, i, r, err)
	}
	return rows
}

// cutUnits reads fragment i unit by unit and by runs of units.
func (s *suite) cutUnits(t *testing.T, scan *formats.Scan, i int, full []row, mem memory.Allocator) {
	t.Helper()
	f := scan.Fragments[i]
	n := len(f.Units)
	var cat []row
	starts := []int{0}
	for u, unit := range f.Units {
		rows := s.mustRead(t, scan, i, units(u, u+1), 50, mem)
		if unit.Rows >= 0 && int64(len(rows)) != unit.Rows {
			t.Fatalf("%s: %s: unit %d counts %d rows and delivers %d", s.name, f.URL, u, unit.Rows, len(rows))
		}
		cat = append(cat, rows...)
		starts = append(starts, len(cat))
	}
	s.checkRows(t, f.URL+": unit by unit", cat, ids(full))
	if n > 2 {
		rows := s.mustRead(t, scan, i, units(1, n-1), 333, mem)
		s.checkRows(t, f.URL+": the units but the first and last", rows, ids(full[starts[1]:starts[n-1]]))
		// Two parts of one fetch, decoded once it is released.
		fe, err := scan.Fetch(context.Background(), i, units(0, n))
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		a, errA := fe.Part(units(0, 1))
		b, errB := fe.Part(units(1, n))
		fe.Release()
		if errA != nil || errB != nil {
			t.Fatalf("%s: parts: %v, %v", s.name, errA, errB)
		}
		for _, p := range []struct {
			fe   *formats.Fetched
			want []row
		}{{b, full[starts[1]:]}, {a, full[:starts[1]]}} {
			rows, _, err := s.decode(context.Background(), scan, p.fe, 64, mem)
			p.fe.Release()
			if err != nil {
				t.Fatalf("%s: a part of a released fetch: %v", s.name, err)
			}
			s.checkRows(t, f.URL+": a part of a released fetch", rows, ids(p.want))
		}
	}
}

// cutRows reads fragment i in row ranges, where it knows its count.
func (s *suite) cutRows(t *testing.T, scan *formats.Scan, i int, full []row, mem memory.Allocator) {
	t.Helper()
	f := scan.Fragments[i]
	if f.Rows < 0 {
		return
	}
	cuts := s.cuts(t, f)
	batches := []int{1, 3, 64, 1000}
	for k := range len(cuts) - 1 {
		a, b := cuts[k], cuts[k+1]
		rows := s.mustRead(t, scan, i, scan.RowRange(i, a, b), batches[k%len(batches)], mem)
		s.checkRows(t, f.URL+": "+scan.RowRange(i, a, b).String(), rows, ids(full[a:b]))
	}
	if len(cuts) < 4 {
		return
	}
	// Two parts of one fetch across a cut, decoded once it is released.
	a, b, c := cuts[1], cuts[len(cuts)/2], cuts[len(cuts)-2]
	fe, err := scan.Fetch(context.Background(), i, scan.RowRange(i, a, c))
	if err != nil {
		t.Fatalf("%s: %v", s.name, err)
	}
	p1, err1 := fe.Part(scan.RowRange(i, a, b))
	p2, err2 := fe.Part(scan.RowRange(i, b, c))
	fe.Release()
	if err1 != nil || err2 != nil {
		t.Fatalf("%s: parts: %v, %v", s.name, err1, err2)
	}
	for _, p := range []struct {
		fe       *formats.Fetched
		from, to int64
	}{{p2, b, c}, {p1, a, b}} {
		rows, _, err := s.decode(context.Background(), scan, p.fe, 77, mem)
		p.fe.Release()
		if err != nil {
			t.Fatalf("%s: a part of a released fetch: %v", s.name, err)
		}
		s.checkRows(t, f.URL+": a part of a released fetch", rows, ids(full[p.from:p.to]))
	}
}

// cuts are the rows fragment f is cut at: its ends, every unit boundary
// and a row either side, and random rows.
func (s *suite) cuts(t *testing.T, f *formats.Fragment) []int64 {
	cuts := []int64{0, f.Rows}
	var at int64
	for _, u := range f.Units {
		cuts = append(cuts, at-1, at, at+1)
		at += u.Rows
	}
	r := rng(t)
	for range 8 {
		if f.Rows > 0 {
			cuts = append(cuts, r.Int64N(f.Rows+1))
		}
	}
	cuts = slices.DeleteFunc(cuts, func(c int64) bool { return c < 0 || c > f.Rows })
	slices.Sort(cuts)
	return slices.Compact(cuts)
}

// testMasks: with a row mask on every file (formats' PlanOptions.Masks:
// the first and last rows and one in five), whole reads, unit reads and
// row ranges in live rows deliver the rows left, each once.
func (s *suite) testMasks(t *testing.T) {
	if s.d.Dataset != nil {
		t.Skip("a Dataset driver plans its own masks (its deletes are checked by ExactlyOnce)")
	}
	ds, scan := s.write(t, fileRows(), formats.PlanOptions{})
	masks := map[string]*formats.RowMask{}
	for _, f := range scan.Fragments {
		if f.Rows < 0 {
			t.Skipf("%s does not know its row counts, which a mask needs", f.URL)
		}
		m := &formats.RowMask{}
		for r, id := range ds.ids[ds.fileOf(f)] {
			if r == 0 || r == len(ds.ids[ds.fileOf(f)])-1 || id%5 == 2 {
				m.Deleted = append(m.Deleted, int64(r))
				ds.gone[id] = true
			}
		}
		masks[f.URL] = m
	}
	masked := s.plan(t, ds, formats.PlanOptions{Masks: masks})
	mem := checkedMem(t)
	var got [][]row
	for i, f := range masked.Fragments {
		full := s.mustRead(t, masked, i, whole(masked, i), 100, mem)
		s.checkFragment(t, ds, f, full)
		s.cutUnits(t, masked, i, full, mem)
		s.cutRows(t, masked, i, full, mem)
		got = append(got, full)
	}
	s.checkOnce(t, ds, got)
}

// filterText is the filter testFilter plans with, and keep the rows it
// keeps.
const filterText = "id >= 150 AND id < 1500 AND (b = TRUE OR f64 IS NULL)"

func keep(id int64) bool {
	return id >= 150 && id < 1500 && ((id%7 != 6 && id%3 == 0) || id%11 == 3)
}

// testFilter: behind a row filter (package filter's, which drivers may
// prune units and pages by), counts are unknown and exactly the rows that
// pass are delivered.
func (s *suite) testFilter(t *testing.T) {
	for _, c := range []string{"b", "f64"} {
		if slices.Contains(s.d.Lacks, c) {
			t.Skipf("the format lacks column %q, which the filter reads", c)
		}
	}
	flt, err := filter.Parse(filterText)
	if err != nil {
		t.Fatal(err)
	}
	ds := s.files(t, fileRows(), nil)
	for _, rows := range ds.ids {
		for _, id := range rows {
			if !keep(id) {
				ds.gone[id] = true
			}
		}
	}
	scan := s.plan(t, ds, formats.PlanOptions{Filter: flt})
	mem := checkedMem(t)
	var got [][]row
	for i, f := range scan.Fragments {
		if f.Rows >= 0 {
			t.Errorf("%s: %s counts %d rows behind a filter", s.name, f.URL, f.Rows)
		}
		full := s.mustRead(t, scan, i, units(0, len(f.Units)), 100, mem)
		s.checkFragment(t, ds, f, full)
		s.cutUnits(t, scan, i, full, mem)
		got = append(got, full)
	}
	s.checkOnce(t, ds, got)
}

// testEmpty: an empty file (the format's own: a footer, a header, no
// bytes) among others reads as no rows, and alone it plans as no rows or
// is refused with an error that names it.
func (s *suite) testEmpty(t *testing.T) {
	ds, scan := s.write(t, []int64{0, 40, 0}, formats.PlanOptions{})
	mem := checkedMem(t)
	s.checkCounts(t, scan)
	var got [][]row
	for i, f := range scan.Fragments {
		full := s.mustRead(t, scan, i, whole(scan, i), 100, mem)
		s.checkFragment(t, ds, f, full)
		if len(f.Units) > 0 {
			s.cutUnits(t, scan, i, full, mem)
		}
		s.cutRows(t, scan, i, full, mem)
		got = append(got, full)
	}
	s.checkOnce(t, ds, got)

	alone := s.files(t, []int64{0}, nil)
	scan, err := alone.plan(context.Background(), formats.PlanOptions{})
	if err != nil {
		if len(alone.paths) > 0 && !names(err, alone.paths[0]) {
			t.Errorf("%s: an empty file alone is refused with an error that does not name it: %v", s.name, err)
		}
		return
	}
	defer scan.Close()
	if r := scan.Rows(); r > 0 {
		t.Errorf("%s: an empty file counts %d rows", s.name, r)
	}
	for i := range scan.Fragments {
		if rows := s.mustRead(t, scan, i, whole(scan, i), 100, mem); len(rows) > 0 {
			t.Errorf("%s: an empty file delivers %s", s.name, span(ids(rows)))
		}
	}
}
