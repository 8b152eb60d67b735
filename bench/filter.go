package main

import (
	"context"
	"fmt"
	"runtime"
)

// filterScan is the filter scenario: the bench data's rows rewritten in 25
// row groups a file (ids sorted, as a table clustered on its key is), streamed
// whole and with a filter on id that keeps 1% of the row groups, which
// row-group statistics let the reader skip without fetching them. The line
// is the filtered scan, with speedup = elapsed of the unfiltered scan over
// elapsed of the filtered one, both open to last batch, the fastest of
// cfg.Reps runs each, run in turns.
func (e *env) filterScan(ctx context.Context) error {
	spec := e.cfg.Spec
	spec.RowGroupRows = max(spec.RowsPerFile/25, 1)
	spec.PageIndex, spec.SmallPages = false, false
	d, err := writeData(ctx, e.cfg, e.data.root, spec)
	if err != nil {
		return err
	}
	perFile := (spec.RowsPerFile + spec.RowGroupRows - 1) / spec.RowGroupRows
	groups := spec.Files * perFile
	kept := max(groups/100, 1)
	keepRows := int64(kept * spec.RowGroupRows)
	expr := fmt.Sprintf("id < %d", keepRows)
	var plain, filtered sample
	for i := range max(e.cfg.Reps, 1) {
		for _, withFilter := range []bool{false, true} {
			o := e.opts()
			want := spec.Rows()
			if withFilter {
				o.Filter, want = expr, keepRows
			}
			runtime.GC()
			m, err := measureStream(ctx, streamRun{urls: []string{d.dir}, opts: o, sumIDs: true})
			if err != nil {
				return err
			}
			if err := expectRows(m, want); err != nil {
				return fmt.Errorf("filter %q: %w", o.Filter, err)
			}
			if m.idSum != want*(want-1)/2 {
				return fmt.Errorf("filter %q: ids sum to %d, want %d: a row came twice, never, or did not pass", o.Filter, m.idSum, want*(want-1)/2)
			}
			s := &plain
			if withFilter {
				s = &filtered
			}
			s.rates = append(s.rates, m.rowsPerSec())
			if i == 0 || m.seconds < s.m.seconds {
				s.m = m
			}
			s.baseline = e.floor
		}
	}
	r := e.result("filter_1pct_rowgroups", filtered)
	r.set("filter", expr)
	r.set("row_groups", groups)
	r.set("kept_row_groups", kept)
	r.set("kept_row_groups_fraction", float64(kept)/float64(groups))
	r.set("unfiltered_seconds", plain.m.seconds)
	r.set("unfiltered_rows", plain.m.rows)
	r.set("unfiltered_read_bytes", plain.m.readBytes)
	r.set("filtered_seconds", filtered.m.seconds)
	r.set("speedup", plain.m.seconds/filtered.m.seconds)
	r.set("read_bytes_ratio", float64(filtered.m.readBytes)/float64(plain.m.readBytes))
	r.set("options", fmt.Sprintf("storage order, default options, all columns; %d files of %d rows in row groups of %d rows sorted on id", spec.Files, spec.RowsPerFile, spec.RowGroupRows))
	r.target("speedup", ">=", 20)
	return e.emit(r)
}
