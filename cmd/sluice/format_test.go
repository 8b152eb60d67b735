package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFormatFlag: --format reads CSV files named otherwise, in cat and
// inspect; without it such a file named explicitly reads as CSV by its
// bytes; an unknown name and --iceberg with it are usage errors. A path
// with glob characters that exists is read as that path.
func TestFormatFlag(t *testing.T) {
	dir := t.TempDir()
	const body = "id,name\n1,\"a,b\"\n2,c\n3,\n"
	for _, n := range []string{"x.tbl", "y.dat", "noext", "data[1].csv", "data1.csv"} {
		text := body
		if n == "data1.csv" {
			text = "id,name\n9,z\n" // what the pattern data[1].csv would match
		}
		if err := os.WriteFile(filepath.Join(dir, n), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	const want = "{\"id\":1,\"name\":\"a,b\"}\n{\"id\":2,\"name\":\"c\"}\n{\"id\":3,\"name\":null}\n"
	for _, n := range []string{"x.tbl", "y.dat", "noext"} {
		p := filepath.Join(dir, n)
		if got := ok(t, "cat", "--no-progress", "--format", "csv", p); got != want {
			t.Errorf("cat --format csv %s:\n%s\nwant:\n%s", n, got, want)
		}
		rep := inspectJSON(t, "--format", "csv", p)
		if len(rep.Files) != 1 || rep.Files[0].Format != "csv" || len(rep.Schema) != 2 || rep.Schema[0].Type != "int64" {
			t.Errorf("inspect --format csv %s: files %+v, schema %+v", n, rep.Files, rep.Schema)
		}
		if got := ok(t, "cat", "--no-progress", p); got != want {
			t.Errorf("cat %s, without --format:\n%s\nwant:\n%s", n, got, want)
		}
	}
	// The file named data[1].csv, not data1.csv, which the pattern matches.
	if got := ok(t, "cat", "--no-progress", filepath.Join(dir, "data[1].csv")); got != want {
		t.Errorf("cat data[1].csv:\n%s\nwant:\n%s", got, want)
	}
	// A pattern that names no file still expands.
	if got := ok(t, "cat", "--no-progress", filepath.Join(dir, "data[0-9].csv")); got != "{\"id\":9,\"name\":\"z\"}\n" {
		t.Errorf("cat data[0-9].csv: %s", got)
	}
	// --format reads every file of a directory, whatever its name.
	rep := inspectJSON(t, "--format", "csv", dir)
	if len(rep.Files) != 5 || rep.Totals.Files != 5 {
		t.Errorf("inspect --format csv of the directory: %d files", len(rep.Files))
	}
	fails(t, exitUsage, []string{`--format "xlsx"`, "parquet, orc, avro, csv, tsv, jsonl, json"}, "cat", "--format", "xlsx", dir)
	fails(t, exitUsage, []string{"--format and --iceberg"}, "inspect", "--format", "csv", "--iceberg", dir)
	if r := run(t, "cat", "--help"); !strings.Contains(r.stdout+r.stderr, "--format") {
		t.Errorf("cat --help does not list --format")
	}
}
