package formatstest

import (
	"context"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/sluicedata/sluice/formats"
)

// testSkips: rows the driver leaves out (Skips.Write's bad rows) are
// reported by the reads that meet them, once between reads that cut a
// unit, and every other row is delivered once, as written.
func (s *suite) testSkips(t *testing.T) {
	if s.d.Skips == nil {
		t.Skip("the driver leaves no rows out (ExactlyOnce checks that it reports none)")
	}
	bad := func(id int64) bool { return id%9 == 4 || id == 701 }
	ds := s.files(t, fileRows(), bad)
	scan := s.plan(t, ds, formats.PlanOptions{Formats: s.d.Skips.Formats})
	mem := checkedMem(t)
	ctx := context.Background()
	var got [][]row
	for i, f := range scan.Fragments {
		var nbad int64
		for _, id := range ds.ids[ds.fileOf(f)] {
			if ds.gone[id] {
				nbad++
			}
		}
		full, skipped, err := s.read(ctx, scan, i, whole(scan, i), 100, mem)
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		s.checkFragment(t, ds, f, full)
		if skipped != nbad {
			t.Errorf("%s: %s: a whole read reports %d rows skipped of %d bad", s.name, f.URL, skipped, nbad)
		}
		var cat []row
		var sum int64
		for u := range f.Units {
			rows, n, err := s.read(ctx, scan, i, units(u, u+1), 100, mem)
			if err != nil {
				t.Fatalf("%s: %v", s.name, err)
			}
			cat, sum = append(cat, rows...), sum+n
		}
		s.checkRows(t, f.URL+": unit by unit", cat, ids(full))
		if sum != nbad {
			t.Errorf("%s: %s: reads unit by unit report %d rows skipped of %d bad", s.name, f.URL, sum, nbad)
		}
		s.skipsByRows(t, scan, i, full, nbad, mem)
		got = append(got, full)
	}
	s.checkOnce(t, ds, got)
}

// skipsByRows reads fragment i in row ranges, where it knows its count:
// the ranges report the unit's skipped rows once between them.
func (s *suite) skipsByRows(t *testing.T, scan *formats.Scan, i int, full []row, nbad int64, mem memory.Allocator) {
	t.Helper()
	f := scan.Fragments[i]
	if f.Rows < 0 {
		return
	}
	cuts := s.cuts(t, f)
	var sum int64
	for k := range len(cuts) - 1 {
		rr := scan.RowRange(i, cuts[k], cuts[k+1])
		rows, n, err := s.read(context.Background(), scan, i, rr, 64, mem)
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		s.checkRows(t, f.URL+": "+rr.String(), rows, ids(full[cuts[k]:cuts[k+1]]))
		sum += n
	}
	if sum != nbad {
		t.Errorf("%s: %s: reads of row ranges report %d rows skipped of %d bad", s.name, f.URL, sum, nbad)
	}
}
