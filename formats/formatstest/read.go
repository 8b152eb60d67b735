package formatstest

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/sluicedata/sluice/formats"
)

// row is a delivered row: its id and its values as Arrow prints them, in
// the order of suite.columns.
type row struct {
	id   int64
	vals []string
}

// ids are the ids of rows.
func ids(rows []row) []int64 {
	out := make([]int64, len(rows))
	for i, r := range rows {
		out[i] = r.id
	}
	return out
}

// whole is the range of all of fragment i: by rows where its count is
// known, by units where it is not.
func whole(scan *formats.Scan, i int) formats.Range {
	f := scan.Fragments[i]
	if f.Rows >= 0 {
		return scan.RowRange(i, 0, f.Rows)
	}
	return units(0, len(f.Units))
}

// units is the range of units [a, b), read whole.
func units(a, b int) formats.Range {
	return formats.Range{Start: -1, End: -1, FirstUnit: a, EndUnit: b}
}

// read reads range r of fragment i with Fetch then Decode.
func (s *suite) read(ctx context.Context, scan *formats.Scan, i int, r formats.Range, batchRows int, mem memory.Allocator) ([]row, int64, error) {
	fe, err := scan.Fetch(ctx, i, r)
	if err != nil {
		return nil, 0, err
	}
	defer fe.Release()
	return s.decode(ctx, scan, fe, batchRows, mem)
}

// decode decodes fe, checking that every batch has the scan's schema and
// at most batchRows rows, and returns its rows and the rows the driver
// said it skipped.
func (s *suite) decode(ctx context.Context, scan *formats.Scan, fe *formats.Fetched, batchRows int, mem memory.Allocator) ([]row, int64, error) {
	rows := []row{}
	skipped, err := scan.Decode(ctx, fe, batchRows, mem, func(b arrow.RecordBatch) error {
		defer b.Release()
		if !b.Schema().Equal(scan.Schema) {
			return fmt.Errorf("formatstest: a batch has schema %s, the scan %s", b.Schema(), scan.Schema)
		}
		if b.NumRows() > int64(batchRows) {
			return fmt.Errorf("formatstest: a batch of %d rows, asked for at most %d", b.NumRows(), batchRows)
		}
		got, err := s.rows(b)
		rows = append(rows, got...)
		return err
	})
	return rows, skipped, err
}

// rows turns b's rows into rows.
func (s *suite) rows(b arrow.RecordBatch) ([]row, error) {
	cols := make([]arrow.Array, len(s.columns))
	for c, name := range s.columns {
		idx := b.Schema().FieldIndices(name)
		if len(idx) != 1 {
			return nil, fmt.Errorf("formatstest: a batch has %d columns %q", len(idx), name)
		}
		cols[c] = b.Column(idx[0])
	}
	out := make([]row, b.NumRows())
	for r := range out {
		vals := make([]string, len(cols))
		for c, col := range cols {
			vals[c] = col.ValueStr(r)
		}
		id, err := idOf(cols[0], r)
		if err != nil {
			return nil, err
		}
		out[r] = row{id: id, vals: vals}
	}
	return out, nil
}

// idOf is the id in row r of column id, whatever integer type the driver
// gave it (the schema check says whether that is the table's).
func idOf(col arrow.Array, r int) (int64, error) {
	if col.IsNull(r) {
		return 0, fmt.Errorf("formatstest: a row's id is null")
	}
	if c, ok := col.(*array.Int64); ok {
		return c.Value(r), nil
	}
	id, err := strconv.ParseInt(col.ValueStr(r), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("formatstest: id %q of type %s: %w", col.ValueStr(r), col.DataType(), err)
	}
	return id, nil
}

// wrong says how r differs from the row of its id as written, or "".
func (s *suite) wrong(r row) string {
	if r.id < 0 || r.id >= tableRows {
		return fmt.Sprintf("id %d, which the table does not have", r.id)
	}
	var diffs []string
	for c, v := range r.vals {
		if want := s.want[c][r.id]; v != want {
			diffs = append(diffs, fmt.Sprintf("%s = %q, want %q", s.columns[c], v, want))
		}
	}
	if diffs == nil {
		return ""
	}
	return fmt.Sprintf("row id %d: %s", r.id, strings.Join(diffs, ", "))
}

// checkRows fails t unless got are the rows of ids want, in that order,
// each with the values written.
func (s *suite) checkRows(t *testing.T, what string, got []row, want []int64) {
	t.Helper()
	if err := s.diff(what, got, want); err != nil {
		t.Fatal(err)
	}
}

// diff says how got differs from the rows of ids want, in that order,
// with the values written; nil if it does not.
func (s *suite) diff(what string, got []row, want []int64) error {
	if gotIDs := ids(got); !slices.Equal(gotIDs, want) {
		return fmt.Errorf("%s: %s: got the rows %s, want %s", s.name, what, span(gotIDs), span(want))
	}
	return s.diffValues(what, got)
}

// checkValues fails t if a row of got has a value other than written.
func (s *suite) checkValues(t *testing.T, what string, got []row) {
	t.Helper()
	if err := s.diffValues(what, got); err != nil {
		t.Fatal(err)
	}
}

// diffValues says which row of got has a value other than written.
func (s *suite) diffValues(what string, got []row) error {
	for _, r := range got {
		if w := s.wrong(r); w != "" {
			return fmt.Errorf("%s: %s: %s", s.name, what, w)
		}
	}
	return nil
}

// span prints ids as runs of consecutive ids, so that a failure shows
// which rows are missing or repeated without printing thousands; past 24
// runs, it prints the first and last 12.
func span(ids []int64) string {
	var runs []string
	for i := 0; i < len(ids); {
		j := i + 1
		for j < len(ids) && ids[j] == ids[j-1]+1 {
			j++
		}
		if j-i == 1 {
			runs = append(runs, fmt.Sprint(ids[i]))
		} else {
			runs = append(runs, fmt.Sprintf("%d-%d", ids[i], ids[j-1]))
		}
		i = j
	}
	if n := len(runs); n > 24 {
		runs = append(runs[:12:12], append([]string{fmt.Sprintf("... %d runs ...", n-24)}, runs[n-12:]...)...)
	}
	return fmt.Sprintf("[%s] (%d rows)", strings.Join(runs, " "), len(ids))
}
