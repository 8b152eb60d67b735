package text

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"go.uber.org/goleak"

	"github.com/sluicedata/sluice/formats"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// write writes files (name to contents) under a new directory.
func write(t testing.TB, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// table is what a read delivered: the schema and each row's values as
// text, "NULL" for null.
type table struct {
	schema *arrow.Schema
	rows   [][]string
}

// readAll plans urls with the text drivers and reads every unit of every
// file, in order, with a checked allocator.
func readAll(t testing.TB, o Options, columns []string, urls ...string) (*table, error) {
	t.Helper()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	ctx := context.Background()
	ds, err := formats.Plan(ctx, urls, formats.PlanOptions{Formats: All(o), Columns: columns})
	if err != nil {
		return nil, err
	}
	defer ds.Close()
	out := &table{schema: ds.Schema}
	// Unit by unit, as ranks reading different chunks do.
	for i, f := range ds.Fragments {
		var row int64
		for u, unit := range f.Units {
			r := formats.Range{Start: -1, End: -1, FirstUnit: u, EndUnit: u + 1}
			if f.Rows >= 0 {
				r = ds.RowRange(i, row, row+unit.Rows)
				row += unit.Rows
				if unit.Rows == 0 {
					continue
				}
			}
			err := ds.Read(ctx, i, r, 7, mem, func(b arrow.RecordBatch) error {
				defer b.Release()
				out.rows = append(out.rows, rowsOf(b)...)
				return nil
			})
			if err != nil {
				return out, err
			}
		}
	}
	return out, nil
}

func rowsOf(b arrow.RecordBatch) [][]string {
	var rows [][]string
	for i := range int(b.NumRows()) {
		row := make([]string, b.NumCols())
		for c := range row {
			col := b.Column(c)
			if col.IsNull(i) {
				row[c] = "NULL"
			} else {
				row[c] = col.ValueStr(i)
			}
		}
		rows = append(rows, row)
	}
	return rows
}

func (tb *table) String() string {
	var sb strings.Builder
	for _, r := range tb.rows {
		sb.WriteString(strings.Join(r, "|"))
		sb.WriteByte('\n')
	}
	return sb.String()
}

func mustRead(t testing.TB, o Options, columns []string, urls ...string) *table {
	t.Helper()
	tb, err := readAll(t, o, columns, urls...)
	if err != nil {
		t.Fatal(err)
	}
	return tb
}
