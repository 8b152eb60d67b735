package iceberg_test

import (
	"context"
	"iter"
	"os"
	"path"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	ice "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/sluicedata/sluice/formats/iceberg"
	vc "github.com/sluicedata/sluice/internal/testkit/valuecheck"
	"github.com/sluicedata/sluice/stream"
)

// Deletes where a batch's copy could go wrong, every value checked: a
// position delete at the first and the last row of row groups and files,
// a row group deleted whole, and three equality delete files, one of ids,
// one of tags and one whose key is a null text (it deletes every row whose
// text is null), read whole and in batches that cut row groups.
func TestDeletesAtBatchEdges(t *testing.T) {
	const n = 3000 // files of 1,500 rows, row groups of 200
	ctx := context.Background()
	cat, ident, tbl := valuesData(t, n)
	byPos := []int64{0, 199, 200, 399, 1299, 1300, 1499, 1500, 1501, 2999}
	for id := int64(400); id < 600; id++ {
		byPos = append(byPos, id)
	}
	tbl, err := tbl.Delete(ctx, ice.IsIn(ice.Reference("id"), byPos...), nil)
	if err != nil {
		t.Fatal(err)
	}
	commitEqualityDeletes(t, tbl, []int64{201, 398, 1000, 1001, 2998})
	tbl = reload(t, cat, ident)
	tags := []string{vc.Tag(42), vc.Tag(777)}
	commitEqualityOn(t, tbl, 7, arrow.Field{Name: "tag", Type: arrow.BinaryTypes.String, Nullable: true}, func(b *array.StringBuilder) { b.AppendValues(tags, nil) })
	tbl = reload(t, cat, ident)
	commitEqualityOn(t, tbl, 6, arrow.Field{Name: "text", Type: arrow.BinaryTypes.String, Nullable: true}, func(b *array.StringBuilder) { b.AppendNull() })
	it, err := iceberg.OpenCatalog(ctx, cat, ident, iceberg.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	if st := it.Stats(); st.PositionDeleted != int64(len(byPos)) || st.EqualityDeleteFiles != 3 {
		t.Fatalf("planned %+v, want %d rows position-deleted and 3 equality delete files", st, len(byPos))
	}
	text, _ := vc.ByName("text")
	deleted := map[int64]bool{201: true, 398: true, 1000: true, 1001: true, 2998: true}
	for _, id := range byPos {
		deleted[id] = true
	}
	var want []int64
	for id := range int64(n) {
		tag := vc.Tag(id)
		if !deleted[id] && text.Value(id) != nil && tag != tags[0] && tag != tags[1] {
			want = append(want, id)
		}
	}
	cols := []string{"id", "i32", "unit", "f64", "b", "text", "tag", "dec", "date", "ts", "tstz", "lst", "st", "mp"}
	for _, batch := range []int{0, 1, 77, 200, 4096} {
		streamChecked(t, stream.Options{Plan: it.Plan, Columns: cols, BatchSize: batch}, want)
	}
	// The batches decoded to be compacted, and the copies, are in memory
	// the scan reuses once released: held past the loop while the
	// stream goes on, every one keeps its values.
	for _, batch := range []int{0, 77} {
		streamHeld(t, stream.Options{Plan: it.Plan, Columns: cols, BatchSize: batch, Limits: stream.Limits{ReadBatchSize: 150}}, want)
	}
	// The filter's answer joins the deletes': one copy of what both leave.
	var filtered []int64
	for _, id := range want {
		if vc.X(id) < 0.5 {
			filtered = append(filtered, id)
		}
	}
	streamChecked(t, stream.Options{Plan: it.Plan, Columns: cols, Filter: "unit < 0.5"}, filtered)
}

func reload(t *testing.T, cat interface {
	LoadTable(context.Context, table.Identifier) (*table.Table, error)
}, ident table.Identifier) *table.Table {
	t.Helper()
	tbl, err := cat.LoadTable(context.Background(), ident)
	if err != nil {
		t.Fatal(err)
	}
	return tbl
}

// commitEqualityOn commits an equality delete file over field id, whose
// keys fill appends.
func commitEqualityOn(t *testing.T, tbl *table.Table, id int, field arrow.Field, fill func(*array.StringBuilder)) {
	t.Helper()
	b := array.NewStringBuilder(memory.DefaultAllocator)
	fill(b)
	col := b.NewArray()
	b.Release()
	rec := array.NewRecordBatch(arrow.NewSchema([]arrow.Field{field}, nil), []arrow.Array{col}, int64(col.Len()))
	col.Release()
	defer rec.Release()
	var recs iter.Seq2[arrow.RecordBatch, error] = func(yield func(arrow.RecordBatch, error) bool) { yield(rec, nil) }
	tx := tbl.NewTransaction()
	if err := tx.CommitEqualityDeletes(context.Background(), []int{id}, recs, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// A delete file that cannot be read fails Open with an error naming it,
// whichever kind it is and while the other kind is being read beside it:
// never a table with fewer deletes.
func TestUnreadableDeleteFile(t *testing.T) {
	ctx := context.Background()
	cat, ident, tbl := valuesData(t, 600)
	tbl, err := tbl.Delete(ctx, ice.IsIn(ice.Reference("id"), int64(3), int64(250)), nil)
	if err != nil {
		t.Fatal(err)
	}
	commitEqualityDeletes(t, tbl, []int64{7, 401})
	tbl = reload(t, cat, ident)
	tasks, err := tbl.Scan().PlanFiles(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var pos, eq string
	for _, task := range tasks {
		for _, d := range task.DeleteFiles {
			pos = d.FilePath()
		}
		for _, d := range task.EqualityDeleteFiles {
			eq = d.FilePath()
		}
	}
	if pos == "" || eq == "" {
		t.Fatalf("no position (%q) or equality (%q) delete file", pos, eq)
	}
	local := func(p string) string { return strings.TrimPrefix(p, "file://") }
	for _, broken := range [][]string{{pos}, {eq}, {pos, eq}} {
		var kept [][]byte
		for _, p := range broken {
			b, err := os.ReadFile(local(p))
			if err != nil {
				t.Fatal(err)
			}
			kept = append(kept, b)
			if err := os.WriteFile(local(p), []byte("not a parquet file"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		it, err := iceberg.OpenCatalog(ctx, cat, ident, iceberg.Options{})
		switch {
		case err == nil:
			it.Close()
			t.Errorf("%v broken: Open read the table", broken)
		case !strings.Contains(err.Error(), path.Base(broken[0])) && !strings.Contains(err.Error(), path.Base(broken[len(broken)-1])):
			t.Errorf("%v broken: the error names neither: %v", broken, err)
		}
		for i, p := range broken {
			if err := os.WriteFile(local(p), kept[i], 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	it, err := iceberg.OpenCatalog(ctx, cat, ident, iceberg.Options{})
	if err != nil {
		t.Fatalf("restored: %v", err)
	}
	defer it.Close()
	if st := it.Stats(); st.PositionDeleted != 2 || st.EqualityDeleteFiles != 1 {
		t.Fatalf("restored: planned %+v, want 2 rows position-deleted and an equality delete file", st)
	}
}
