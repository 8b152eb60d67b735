package formatstest

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"golang.org/x/sync/errgroup"

	"github.com/sluicedata/sluice/formats"
)

// testReleased: a released fetch is not decoded, nor a part taken of it,
// and releasing twice is releasing once; a part taken before the release
// still decodes as written. Fetches released and made again, on many
// goroutines (a driver that recycles their memory reuses it), decode as
// written.
func (s *suite) testReleased(t *testing.T) {
	ctx := context.Background()
	_, scan := s.write(t, []int64{1300}, formats.PlanOptions{})
	mem := checkedMem(t)
	r := whole(scan, 0)
	full := s.mustRead(t, scan, 0, r, 8192, mem)

	fe, err := scan.Fetch(ctx, 0, r)
	if err != nil {
		t.Fatal(err)
	}
	part, err := fe.Part(r)
	if err != nil {
		t.Fatal(err)
	}
	fe.Release()
	fe.Release()
	if rows, _, err := s.decode(ctx, scan, fe, 100, mem); err == nil {
		t.Errorf("%s: a released fetch decoded to %d rows, no error", s.name, len(rows))
	}
	if _, err := fe.Part(r); err == nil {
		t.Errorf("%s: a part taken of a released fetch", s.name)
	}
	rows, _, err := s.decode(ctx, scan, part, 100, mem)
	if err != nil {
		t.Fatalf("%s: a part taken before its fetch was released: %v", s.name, err)
	}
	s.checkRows(t, "a part taken before its fetch was released", rows, ids(full))
	part.Release()
	if rows, _, err := s.decode(ctx, scan, part, 100, mem); err == nil {
		t.Errorf("%s: a released part decoded to %d rows, no error", s.name, len(rows))
	}

	s.keptBatches(t, scan, r, full, mem)

	starts := s.unitStarts(t, scan, 0, mem)
	var g errgroup.Group
	for w := range 4 {
		g.Go(func() error {
			for k := range 6 {
				rr, want := s.someRange(scan, full, starts, w*6+k)
				got, _, err := s.read(ctx, scan, 0, rr, 50, mem)
				if err != nil {
					return fmt.Errorf("%s: %w", s.name, err)
				}
				if err := s.diff("fetched again after releases, "+rr.String(), got, want); err != nil {
					return err
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
}

// someRange is the k-th of a run of ranges of fragment 0, and the ids of
// full it holds: rows where the count is known, runs of units where not
// (starts[u] is the row of full unit u starts at).
func (s *suite) someRange(scan *formats.Scan, full []row, starts []int, k int) (formats.Range, []int64) {
	f := scan.Fragments[0]
	if f.Rows < 0 {
		n := len(f.Units)
		a := k % n
		b := min(n, a+1+k%3)
		return units(a, b), ids(full[starts[a]:starts[b]])
	}
	a := int64(k*97) % max(f.Rows, 1)
	b := min(f.Rows, a+int64(k*53%400)+1)
	return scan.RowRange(0, a, b), ids(full[a:b])
}

// unitStarts reads fragment i's units one by one and returns the row of a
// whole read each starts at, and the rows' count last.
func (s *suite) unitStarts(t *testing.T, scan *formats.Scan, i int, mem memory.Allocator) []int {
	t.Helper()
	starts := []int{0}
	for u := range scan.Fragments[i].Units {
		rows := s.mustRead(t, scan, i, units(u, u+1), 1000, mem)
		starts = append(starts, starts[u]+len(rows))
	}
	return starts
}

// names reports whether err names the file at path.
func names(err error, path string) bool {
	return err != nil && containsBase(err.Error(), path)
}

// keptBatches: batches decoded from a fetch are the consumer's, and keep
// their values after the fetch is released and its memory, where the
// driver recycles it, is fetched into again.
func (s *suite) keptBatches(t *testing.T, scan *formats.Scan, r formats.Range, full []row, mem memory.Allocator) {
	t.Helper()
	ctx := context.Background()
	fe, err := scan.Fetch(ctx, 0, r)
	if err != nil {
		t.Fatal(err)
	}
	var kept []arrow.RecordBatch
	defer func() {
		for _, b := range kept {
			b.Release()
		}
	}()
	_, err = scan.Decode(ctx, fe, 100, mem, func(b arrow.RecordBatch) error {
		kept = append(kept, b)
		return nil
	})
	fe.Release()
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		s.mustRead(t, scan, 0, r, 100, mem)
	}
	var rows []row
	for _, b := range kept {
		got, err := s.rows(b)
		if err != nil {
			t.Fatal(err)
		}
		rows = append(rows, got...)
	}
	s.checkRows(t, "batches kept past their fetch's release and fetches after it", rows, ids(full))
}

// errStop is the error testStopped's consumer stops with.
var errStop = errors.New("formatstest: the consumer stops")

// testStopped: a consumer that stops after the first batch gets its own
// error back, and every batch the driver made is released (the checked
// allocator ends empty), whether it read by rows or by units.
func (s *suite) testStopped(t *testing.T) {
	ctx := context.Background()
	_, scan := s.write(t, fileRows(), formats.PlanOptions{})
	mem := checkedMem(t)
	for i, f := range scan.Fragments {
		for _, r := range []formats.Range{whole(scan, i), units(0, len(f.Units))} {
			fe, err := scan.Fetch(ctx, i, r)
			if err != nil {
				t.Fatal(err)
			}
			batches := 0
			_, err = scan.Decode(ctx, fe, 10, mem, func(b arrow.RecordBatch) error {
				b.Release()
				batches++
				return errStop
			})
			fe.Release()
			if batches > 0 && !errors.Is(err, errStop) {
				t.Errorf("%s: %s, %v: a consumer stopped with %v, Decode returned %v", s.name, f.URL, r, errStop, err)
			}
			if batches > 1 {
				t.Errorf("%s: %s, %v: %d batches after the consumer stopped", s.name, f.URL, r, batches-1)
			}
		}
	}
}
