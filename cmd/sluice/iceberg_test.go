package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicedata/sluice/internal/corpus"
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
