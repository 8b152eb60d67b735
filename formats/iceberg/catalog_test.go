package iceberg_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"iter"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	ice "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	sqlcat "github.com/apache/iceberg-go/catalog/sql"
	"github.com/apache/iceberg-go/table"
	_ "github.com/jackc/pgx/v5/stdlib" // PostgreSQL, registered as "pgx"
	_ "modernc.org/sqlite"             // the pure-Go SQLite driver, registered as "sqlite"

	"github.com/sluicedata/sluice/checkpoint"
	"github.com/sluicedata/sluice/formats/iceberg"
	"github.com/sluicedata/sluice/stream"
)

// history is a table built through iceberg-go's SQL catalog, snapshot by
// snapshot.
type history struct {
	cat   catalog.Catalog
	ident table.Identifier
	snaps []int64 // in commit order
	what  []string
}

// buildHistory writes a v2 merge-on-read table with appends, a position
// delete, an equality delete, schema evolution (a rename, an added column,
// int promoted to long), another append, a tag and an overwrite.
func buildHistory(t *testing.T, db *sql.DB, dialect sqlcat.SupportedDialect, warehouse string) *history {
	return buildHistoryIn(t, db, dialect, warehouse, "ns")
}

func buildHistoryIn(t *testing.T, db *sql.DB, dialect sqlcat.SupportedDialect, warehouse, namespace string) *history {
	t.Helper()
	cat, err := sqlcat.NewCatalog("sluice", db, dialect, ice.Properties{"warehouse": warehouse})
	if err != nil {
		t.Fatal(err)
	}
	if err := cat.CreateSQLTables(context.Background()); err != nil {
		t.Fatal(err)
	}
	return buildHistoryOn(t, cat, namespace)
}

// buildHistoryOn is buildHistory through any catalog that writes.
func buildHistoryOn(t *testing.T, cat catalog.Catalog, namespace string) *history {
	t.Helper()
	ctx := context.Background()
	h := &history{cat: cat, ident: table.Identifier{namespace, "events"}}
	if err := cat.CreateNamespace(ctx, table.Identifier{namespace}, nil); err != nil {
		t.Fatal(err)
	}
	schema := ice.NewSchema(0,
		ice.NestedField{ID: 1, Name: "id", Type: ice.PrimitiveTypes.Int64},
		ice.NestedField{ID: 2, Name: "name", Type: ice.PrimitiveTypes.String},
		ice.NestedField{ID: 3, Name: "score", Type: ice.PrimitiveTypes.Int32},
	)
	tbl, err := cat.CreateTable(ctx, h.ident, schema, catalog.WithProperties(ice.Properties{
		"format-version": "2", table.WriteDeleteModeKey: table.WriteModeMergeOnRead,
	}))
	if err != nil {
		t.Fatal(err)
	}
	note := func(tb *table.Table, what string) *table.Table {
		h.snaps = append(h.snaps, tb.CurrentSnapshot().SnapshotID)
		h.what = append(h.what, what)
		// Distinct commit times, for AsOf: a sleep lasts at least this long,
		// so the millisecond times differ however loaded the machine.
		time.Sleep(3 * time.Millisecond)
		return tb
	}
	mem := memory.DefaultAllocator
	rows := func(s *arrow.Schema, from, to int, extra bool) arrow.Table {
		b := array.NewRecordBuilder(mem, s)
		defer b.Release()
		for i := from; i < to; i++ {
			b.Field(0).(*array.Int64Builder).Append(int64(i))
			b.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("n%d", i%17))
			switch sb := b.Field(2).(type) {
			case *array.Int32Builder:
				sb.Append(int32(i * 3))
			case *array.Int64Builder:
				sb.Append(int64(i) * 3)
			}
			if extra {
				b.Field(3).(*array.Float64Builder).Append(float64(i) / 4)
			}
		}
		rec := b.NewRecordBatch()
		defer rec.Release()
		return array.NewTableFromRecords(s, []arrow.RecordBatch{rec})
	}
	arrowSchema := func(tb *table.Table) *arrow.Schema {
		s, err := table.SchemaToArrowSchema(tb.Schema(), nil, false, false)
		if err != nil {
			t.Fatal(err)
		}
		// Writes want the table's nullability: every field is optional.
		return s
	}
	appendRows := func(tb *table.Table, from, to int, extra bool, what string) *table.Table {
		data := rows(arrowSchema(tb), from, to, extra)
		defer data.Release()
		tb, err := tb.AppendTable(ctx, data, 64, nil)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return note(tb, what)
	}
	tbl = appendRows(tbl, 0, 300, false, "append 0-299")
	tbl = appendRows(tbl, 300, 600, false, "append 300-599")
	tbl, err = tbl.Delete(ctx, ice.LessThan(ice.Reference("id"), int64(25)), nil)
	if err != nil {
		t.Fatal(err)
	}
	tbl = note(tbl, "position delete id < 25")
	tx := tbl.NewTransaction()
	eqSchema := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true}}, nil)
	b := array.NewInt64Builder(mem)
	for i := 400; i < 430; i++ {
		b.Append(int64(i))
	}
	col := b.NewArray()
	b.Release()
	rec := array.NewRecordBatch(eqSchema, []arrow.Array{col}, int64(col.Len()))
	col.Release()
	var recs iter.Seq2[arrow.RecordBatch, error] = func(yield func(arrow.RecordBatch, error) bool) { yield(rec, nil) }
	if err := tx.CommitEqualityDeletes(ctx, []int{1}, recs, nil); err != nil {
		t.Fatal(err)
	}
	rec.Release()
	if tbl, err = tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	tbl = note(tbl, "equality delete id 400-429")
	tx = tbl.NewTransaction()
	us := tx.UpdateSchema(true, false).
		RenameColumn([]string{"name"}, "label").
		UpdateColumn([]string{"score"}, table.ColumnUpdate{FieldType: ice.Optional[ice.Type]{Valid: true, Val: ice.PrimitiveTypes.Int64}}).
		AddColumn([]string{"extra"}, ice.PrimitiveTypes.Float64, "", false, nil)
	if err := us.Commit(); err != nil {
		t.Fatal(err)
	}
	if tbl, err = tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	tbl = appendRows(tbl, 600, 700, true, "evolve schema, append 600-699")
	// A tag on the snapshot before the overwrite.
	tagged := tbl.CurrentSnapshot().SnapshotID
	if _, _, err := cat.CommitTable(ctx, h.ident, nil, []table.Update{table.NewSetSnapshotRefUpdate("before-overwrite", tagged, table.TagRef, 0, 0, 0)}); err != nil {
		t.Fatal(err)
	}
	if tbl, err = cat.LoadTable(ctx, h.ident); err != nil {
		t.Fatal(err)
	}
	data := rows(arrowSchema(tbl), 1000, 1040, true)
	defer data.Release()
	if tbl, err = tbl.OverwriteTable(ctx, data, 64, nil); err != nil {
		t.Fatal(err)
	}
	note(tbl, "overwrite with 1000-1039")
	return h
}

func openSQLite(t *testing.T) (*sql.DB, string) {
	t.Helper()
	dir := t.TempDir()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "catalog.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db, "file://" + filepath.Join(dir, "warehouse")
}

// sqliteNamespace is an SQL catalog on a new SQLite database, its tables
// made and a namespace "ns" in it: where most tables of these tests are
// written.
func sqliteNamespace(t *testing.T) *sqlcat.Catalog {
	t.Helper()
	db, warehouse := openSQLite(t)
	cat, err := sqlcat.NewCatalog("sluice", db, sqlcat.SQLite, ice.Properties{"warehouse": warehouse})
	if err != nil {
		t.Fatal(err)
	}
	if err := cat.CreateSQLTables(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := cat.CreateNamespace(t.Context(), table.Identifier{"ns"}, nil); err != nil {
		t.Fatal(err)
	}
	return cat
}

// TestSQLCatalogHistory streams every snapshot of a table written through
// the SQL catalog on SQLite and compares it with the plain path; time
// travel by id, tag, branch and time picks the right snapshot.
func TestSQLCatalogHistory(t *testing.T) {
	db, warehouse := openSQLite(t)
	checkHistory(t, buildHistory(t, db, sqlcat.SQLite, warehouse))
}

// TestPostgresCatalogHistory is TestSQLCatalogHistory on PostgreSQL, the
// server scripts/postgres.sh starts (SLUICE_POSTGRES_DSN); skipped
// without one.
func TestPostgresCatalogHistory(t *testing.T) {
	dsn := os.Getenv("SLUICE_POSTGRES_DSN")
	if dsn == "" && os.Getenv("SLUICE_REQUIRE_POSTGRES") != "" {
		t.Fatal("SLUICE_REQUIRE_POSTGRES is set but SLUICE_POSTGRES_DSN is not")
	}
	if dsn == "" {
		t.Skip("SLUICE_POSTGRES_DSN is not set: eval \"$(bash scripts/postgres.sh start)\"")
	}
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// A namespace of its own per run: the server outlives the test.
	ns := fmt.Sprintf("sluice_test_%d", time.Now().UnixNano())
	checkHistory(t, buildHistoryIn(t, db, sqlcat.Postgres, "file://"+t.TempDir(), ns))
}

func checkHistory(t *testing.T, h *history) {
	ctx := context.Background()
	local := func(p string) string { return strings.TrimPrefix(p, "file://") }
	wantRows := map[int64][]string{}
	for i, id := range h.snaps {
		tbl, err := iceberg.OpenCatalog(ctx, h.cat, h.ident, iceberg.Options{SnapshotID: id})
		if err != nil {
			t.Fatalf("%s: %v", h.what[i], err)
		}
		snap := tbl.Snapshot()
		want := naiveRows(t, tbl.Metadata(), &snap, local)
		wantRows[id] = want
		got := streamRows(t, stream.Options{Plan: tbl.Plan, BatchSize: 13, Shuffle: true, Seed: 9, NumSplits: 4, WorldSize: 1})
		sameRows(t, h.what[i], got, want)
		st := tbl.Stats()
		t.Logf("snapshot %d (%s): %d rows, %+v", id, h.what[i], len(got), st)
		if i == 2 && (st.PositionDeleteFiles == 0 || st.PositionDeleted != 25 || st.EqualityDeleteFiles != 0) {
			t.Errorf("%s: planned %+v, want one position delete file of 25 rows", h.what[i], st)
		}
		if i == 3 && (st.EqualityDeleteFiles != 1 || st.FilesWithEqualityDeletes == 0) {
			t.Errorf("%s: planned %+v, want an equality delete file", h.what[i], st)
		}
		// The bare metadata location reads the same.
		bare, err := iceberg.Open(ctx, tbl.MetadataLocation(), iceberg.Options{SnapshotID: id})
		if err != nil {
			t.Fatal(err)
		}
		sameRows(t, h.what[i]+" (metadata location)", streamRows(t, stream.Options{Plan: bare.Plan}), want)
		bare.Close()
		// As of its commit time, the snapshot itself.
		at, err := iceberg.OpenCatalog(ctx, h.cat, h.ident, iceberg.Options{AsOf: time.UnixMilli(snap.TimestampMs)})
		if err != nil {
			t.Fatal(err)
		}
		if at.SnapshotID() != id {
			t.Errorf("as of %d: snapshot %d, want %d", snap.TimestampMs, at.SnapshotID(), id)
		}
		at.Close()
		tbl.Close()
	}
	// Rows shrink and grow as written: 300, 600, 575, 545, 645, 40.
	wantCounts := []int{300, 600, 575, 545, 645, 40}
	for i, id := range h.snaps {
		if len(wantRows[id]) != wantCounts[i] {
			t.Errorf("%s: %d rows, counted by hand %d", h.what[i], len(wantRows[id]), wantCounts[i])
		}
	}
	for ref, want := range map[string]int64{"before-overwrite": h.snaps[4], "main": h.snaps[5]} {
		tbl, err := iceberg.OpenCatalog(ctx, h.cat, h.ident, iceberg.Options{Ref: ref})
		if err != nil {
			t.Fatal(err)
		}
		if tbl.SnapshotID() != want {
			t.Errorf("ref %s: snapshot %d, want %d", ref, tbl.SnapshotID(), want)
		}
		tbl.Close()
	}
	if _, err := iceberg.OpenCatalog(ctx, h.cat, h.ident, iceberg.Options{AsOf: time.UnixMilli(1)}); !errors.Is(err, iceberg.ErrSnapshot) {
		t.Errorf("as of 1970: %v", err)
	}
}

// TestResumeOtherSnapshot refuses a state saved against one snapshot on a
// stream of another, naming both.
func TestResumeOtherSnapshot(t *testing.T) {
	db, warehouse := openSQLite(t)
	h := buildHistory(t, db, sqlcat.SQLite, warehouse)
	ctx := context.Background()
	open := func(id int64) *stream.Dataset {
		tbl, err := iceberg.OpenCatalog(ctx, h.cat, h.ident, iceberg.Options{SnapshotID: id})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tbl.Close() })
		ds, err := stream.Open(ctx, stream.Options{Plan: tbl.Plan, BatchSize: 10})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ds.Close() })
		return ds
	}
	a, b := open(h.snaps[1]), open(h.snaps[2])
	st := a.StateDict()
	err := b.LoadStateDict(st)
	if !errors.Is(err, checkpoint.ErrMismatch) {
		t.Fatalf("loaded a state of another snapshot: %v", err)
	}
	for _, id := range h.snaps[1:3] {
		if !strings.Contains(err.Error(), fmt.Sprint(id)) {
			t.Errorf("error %q does not name snapshot %d", err, id)
		}
	}
	if err := open(h.snaps[1]).LoadStateDict(st); err != nil {
		t.Errorf("the same snapshot refused its own state: %v", err)
	}
}
