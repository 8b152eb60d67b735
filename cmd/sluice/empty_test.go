package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/sluicedata/sluice/internal/testkit/orcwrite"
)

// checkEmpty runs cat and inspect on an empty dataset: cat prints no rows
// and exits 0 with one line on stderr, in any order and on any rank;
// inspect shows 0 rows.
func checkEmpty(t *testing.T, args ...string) {
	t.Helper()
	for _, order := range [][]string{
		nil,
		{"--shuffle", "--seed", "3"},
		{"--num-splits", "4", "--world-size", "2", "--rank", "1", "--shuffle"},
		{"--epoch", "5"},
	} {
		r := run(t, append(append([]string{"cat", "--no-progress"}, order...), args...)...)
		if r.code != 0 || r.stdout != "" {
			t.Fatalf("cat %v %v: exit %d, stdout %q, stderr %q", order, args, r.code, r.stdout, r.stderr)
		}
		if strings.Count(r.stderr, "\n") != 1 || !strings.HasPrefix(r.stderr, "cat: no rows: the dataset is empty") {
			t.Fatalf("cat %v %v: stderr %q, want one line saying the dataset is empty", order, args, r.stderr)
		}
	}
	rep := inspectJSON(t, args...)
	if rep.Totals.Rows != 0 {
		t.Errorf("inspect %v: %d rows", args, rep.Totals.Rows)
	}
	if out := ok(t, append([]string{"inspect", "--no-progress"}, args...)...); !strings.Contains(out, ", 0 rows,") {
		t.Errorf("inspect %v does not say 0 rows:\n%s", args, out)
	}
}

// An empty dataset reads as empty in every format: Parquet (above, in
// TestCatEmptyFile), ORC, CSV (a header alone, and no bytes), JSON Lines
// and an Iceberg table that has never been written.
func TestEmptyDatasets(t *testing.T) {
	dir := t.TempDir()
	put := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	orcPath := filepath.Join(dir, "empty.orc")
	f, err := os.Create(orcPath)
	if err != nil {
		t.Fatal(err)
	}
	w, err := orcwrite.New(f, arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}, nil), orcwrite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	checkEmpty(t, orcPath)
	checkEmpty(t, put("header.csv", "id,s\n"))
	checkEmpty(t, put("nothing.csv", ""))
	checkEmpty(t, put("nothing.jsonl", ""))

	table := filepath.Join(dir, "table")
	if err := os.MkdirAll(filepath.Join(table, "metadata"), 0o755); err != nil {
		t.Fatal(err)
	}
	meta := strings.ReplaceAll(noSnapshotMetadata, "LOCATION", table)
	if err := os.WriteFile(filepath.Join(table, "metadata", "v1.metadata.json"), []byte(meta), 0o644); err != nil {
		t.Fatal(err)
	}
	checkEmpty(t, "--iceberg", table)
	if out := ok(t, "inspect", "--iceberg", table); !strings.Contains(out, "no snapshot: the table has never been written") {
		t.Errorf("inspect of a table without a snapshot:\n%s", out)
	}
	// URLs that name no data file are still not found (exit 3): there is
	// no dataset, empty or not, and no schema.
	fails(t, exitNotFound, []string{"no data files"}, "cat", t.TempDir())
}

// noSnapshotMetadata is the metadata of an Iceberg table created and never
// written, as a catalog leaves it: a schema and no snapshot.
const noSnapshotMetadata = `{
  "format-version": 2,
  "table-uuid": "9c12d441-03fe-4693-9a96-a0705ddf69c1",
  "location": "LOCATION",
  "last-sequence-number": 0,
  "last-updated-ms": 1700000000000,
  "last-column-id": 2,
  "current-schema-id": 0,
  "schemas": [{"type": "struct", "schema-id": 0, "fields": [
    {"id": 1, "name": "id", "required": true, "type": "long"},
    {"id": 2, "name": "s", "required": false, "type": "string"}]}],
  "default-spec-id": 0,
  "partition-specs": [{"spec-id": 0, "fields": []}],
  "last-partition-id": 999,
  "default-sort-order-id": 0,
  "sort-orders": [{"order-id": 0, "fields": []}],
  "properties": {},
  "current-snapshot-id": -1,
  "snapshots": []
}`
