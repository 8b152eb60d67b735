package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// inspect says how CSV files are read, as detected; the flags override it,
// and cat reads what inspect says.
func TestInspectCSVDialect(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a.csv"), []byte("1;\"x;y\"\n2;z\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := ok(t, "inspect", "--no-progress", dir)
	if want := `csv files: delimiter ';', quote '"', escape doubled quote, no header`; !strings.Contains(out, want) {
		t.Errorf("inspect does not say %q:\n%s", want, out)
	}
	if rep := inspectJSON(t, dir); len(rep.Files) != 1 || !strings.HasPrefix(rep.Files[0].Dialect, "delimiter ';'") {
		t.Errorf("inspect --json files: %+v", rep.Files)
	}
	if got, want := ok(t, "cat", "--no-progress", dir), "{\"column0\":1,\"column1\":\"x;y\"}\n{\"column0\":2,\"column1\":\"z\"}\n"; got != want {
		t.Errorf("cat:\n%s\nwant\n%s", got, want)
	}
	if out := ok(t, "inspect", "--no-progress", "--header", dir); !strings.Contains(out, "escape doubled quote, header") {
		t.Errorf("inspect --header:\n%s", out)
	}
	if out := ok(t, "inspect", "--no-progress", "--delimiter", ",", dir); !strings.Contains(out, "delimiter ','") {
		t.Errorf("inspect --delimiter ,:\n%s", out)
	}
	if r := run(t, "cat", "--header", "--no-header", dir); r.code != 2 || !strings.Contains(r.stderr, "--header and --no-header") {
		t.Errorf("--header --no-header: exit %d, stderr %q", r.code, r.stderr)
	}
}

// --null-padding reads a short CSV row with nulls; without it the error
// names the flag.
func TestCatNullPadding(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a.csv"), []byte("a,b,c\n1,x,2.5\n2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, want := ok(t, "cat", "--no-progress", "--null-padding", dir), "{\"a\":1,\"b\":\"x\",\"c\":2.5}\n{\"a\":2,\"b\":null,\"c\":null}\n"; got != want {
		t.Errorf("cat --null-padding:\n%s\nwant\n%s", got, want)
	}
	if r := run(t, "cat", "--no-progress", dir); r.code == 0 || !strings.Contains(r.stderr, "--null-padding") {
		t.Errorf("cat without --null-padding: exit %d, stderr %q", r.code, r.stderr)
	}
}
