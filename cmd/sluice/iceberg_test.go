package main

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	ice "github.com/apache/iceberg-go"
	sqlcat "github.com/apache/iceberg-go/catalog/sql"
	icetable "github.com/apache/iceberg-go/table"

	"github.com/sluicedata/sluice/internal/testkit/corpus"
	"github.com/sluicedata/sluice/internal/testkit/orcwrite"
)

// TestIcebergTable inspects and cats a partitioned table of the shared
// test data with equality deletes, through a rewrite of the relative
// locations its metadata holds.
func TestIcebergTable(t *testing.T) {
	root := filepath.Join(corpus.Dir(t), "iceberg", "duckdb-iceberg", "data", "persistent")
	if !fileExists(root) {
		t.Fatalf("%s not found", root)
	}
	table := root + "/equality_deletes/warehouse/mydb/mytable_partitioned"
	rewrite := "--rewrite=data/persistent/=file://" + root + "/"
	rep := inspectJSON(t, "--iceberg", rewrite, table)
	if rep.Iceberg == nil || rep.Iceberg.Snapshot != 3138177759849079112 || rep.Iceberg.DataFiles != 6 || rep.Iceberg.EqualityDeleteFiles != 3 || rep.Iceberg.RowsAfterDeletes != -1 {
		t.Fatalf("inspect says %+v", rep.Iceberg)
	}
	if !strings.HasPrefix(rep.Plan, "iceberg snapshot 3138177759849079112/") {
		t.Errorf("plan fingerprint %q does not name the snapshot", rep.Plan)
	}
	out := ok(t, "cat", "--iceberg", rewrite, "--columns", "id", table)
	if got := strings.Count(out, "\n"); got != 3 {
		t.Errorf("cat printed %d rows, want the 3 equality deletes leave:\n%s", got, out)
	}
	text := ok(t, "inspect", "--iceberg", rewrite, table)
	if !strings.Contains(text, "3 equality delete files") {
		t.Errorf("inspect does not list the delete files:\n%s", text)
	}
	fails(t, 2, []string{"--iceberg"}, "inspect", "--snapshot-id", "5", table)
}

// TestIcebergORCDeletes cats a table whose data files are Parquet and
// whose position deletes are an ORC file: a table's files are read by the
// driver of the format its metadata declares, whatever drivers the command
// passes for URLs ("a ORC file, which no format given reads" before).
func TestIcebergORCDeletes(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "catalog.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	cat, err := sqlcat.NewCatalog("lake", db, sqlcat.SQLite, ice.Properties{"warehouse": "file://" + filepath.Join(dir, "warehouse")})
	if err != nil {
		t.Fatal(err)
	}
	writeEvents(t, cat, icetable.Identifier{"ns"}, 40) // ids 0-19 and 20-39, a file each
	tbl, err := cat.LoadTable(ctx, icetable.Identifier{"ns", "events"})
	if err != nil {
		t.Fatal(err)
	}
	tasks, err := tbl.Scan().PlanFiles(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(tasks) != 2 {
		t.Fatalf("%d data files, want the 2 of writeEvents", len(tasks))
	}
	// Row 3 of each file: ids 3 and 23.
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "file_path", Type: arrow.BinaryTypes.String},
		{Name: "pos", Type: arrow.PrimitiveTypes.Int64},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	for _, task := range tasks {
		b.Field(0).(*array.StringBuilder).Append(task.File.FilePath())
		b.Field(1).(*array.Int64Builder).Append(3)
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	local := filepath.Join(strings.TrimPrefix(tbl.Location(), "file://"), "data", "deletes.orc")
	f, err := os.Create(local)
	if err != nil {
		t.Fatal(err)
	}
	w, err := orcwrite.New(f, schema, orcwrite.Options{})
	if err == nil {
		if err = w.Write(rec); err == nil {
			err = w.Close()
		}
	}
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(local)
	if err != nil {
		t.Fatal(err)
	}
	df, err := ice.NewDataFileBuilder(tbl.Spec(), ice.EntryContentPosDeletes, tbl.Location()+"/data/deletes.orc", ice.OrcFile, nil, nil, nil, 2, st.Size())
	if err != nil {
		t.Fatal(err)
	}
	tx := tbl.NewTransaction()
	if err := tx.NewRowDelta(nil).AddDeletes(df.Build()).Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if tbl, err = tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	out := ok(t, "cat", "--iceberg", "--columns", "id", tbl.MetadataLocation())
	var want []string
	for id := range 40 {
		if id != 3 && id != 23 {
			want = append(want, fmt.Sprintf(`{"id":%d}`, id))
		}
	}
	got := strings.Fields(out)
	slices.Sort(got)
	slices.Sort(want)
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("cat printed ids %v, want %v", got, want)
	}
}
