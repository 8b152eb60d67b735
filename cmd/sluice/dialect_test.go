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
	if want := `csv files: delimiter ';', quote '"', escape doubled quote, comment none, no header`; !strings.Contains(out, want) {
		t.Errorf("inspect does not say %q:\n%s", want, out)
	}
	if rep := inspectJSON(t, dir); len(rep.Files) != 1 || !strings.HasPrefix(rep.Files[0].Dialect, "delimiter ';'") {
		t.Errorf("inspect --json files: %+v", rep.Files)
	}
	if got, want := ok(t, "cat", "--no-progress", dir), "{\"column0\":1,\"column1\":\"x;y\"}\n{\"column0\":2,\"column1\":\"z\"}\n"; got != want {
		t.Errorf("cat:\n%s\nwant\n%s", got, want)
	}
	if out := ok(t, "inspect", "--no-progress", "--header", dir); !strings.Contains(out, "escape doubled quote, comment none, header") {
		t.Errorf("inspect --header:\n%s", out)
	}
	if out := ok(t, "inspect", "--no-progress", "--delimiter", ",", dir); !strings.Contains(out, "delimiter ','") {
		t.Errorf("inspect --delimiter ,:\n%s", out)
	}
	if r := run(t, "cat", "--header", "--no-header", dir); r.code != 2 || !strings.Contains(r.stderr, "--header and --no-header") {
		t.Errorf("--header --no-header: exit %d, stderr %q", r.code, r.stderr)
	}
}

// inspect prints the comment prefix, quote and escape it detects (a
// comment line, values with stray quotes, a backslash escape), and
// --comment, --quote and --escape set them.
func TestInspectCSVCommentQuoteEscape(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"comment.csv": "# exported 2024-01-01\na;b\n1;2 # the first\n# a note\n3;4\n",
		"stray.csv":   "id,text\n1,she said \"hi\n2,\"quoted\" x\n",
		"escape.csv":  "id,text\n1,\"a\\\"b\"\n2,c\n",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for name, want := range map[string]string{
		"comment.csv": `csv files: delimiter ';', quote '"', escape doubled quote, comment '#', header`,
		"stray.csv":   `csv files: delimiter ',', quote none, escape none, comment none, header`,
		"escape.csv":  `csv files: delimiter ',', quote '"', escape '\\', comment none, header`,
	} {
		if out := ok(t, "inspect", "--no-progress", filepath.Join(dir, name)); !strings.Contains(out, want) {
			t.Errorf("%s: inspect does not say %q:\n%s", name, want, out)
		}
	}
	p := filepath.Join(dir, "comment.csv")
	if got, want := ok(t, "cat", "--no-progress", p), "{\"a\":1,\"b\":2}\n{\"a\":3,\"b\":4}\n"; got != want {
		t.Errorf("cat comment.csv:\n%s\nwant\n%s", got, want)
	}
	if got, want := ok(t, "cat", "--no-progress", filepath.Join(dir, "stray.csv")), "{\"id\":1,\"text\":\"she said \\\"hi\"}\n{\"id\":2,\"text\":\"\\\"quoted\\\" x\"}\n"; got != want {
		t.Errorf("cat stray.csv:\n%s\nwant\n%s", got, want)
	}
	// Given: no comment, where the '#' lines are then rows too (no
	// delimiter cuts the file alike: one column of lines, as DuckDB reads
	// it); a comment of another byte, a quote and an escape.
	if out := ok(t, "inspect", "--no-progress", "--comment", "none", p); !strings.Contains(out, "comment none, header") {
		t.Errorf("inspect --comment none:\n%s", out)
	}
	if out := ok(t, "inspect", "--no-progress", "--quote", "'", "--escape", "\\", "--comment", ";", filepath.Join(dir, "escape.csv")); !strings.Contains(out, `quote '\'', escape '\\', comment ';'`) {
		t.Errorf("inspect --quote --escape --comment:\n%s", out)
	}
	if out := ok(t, "inspect", "--no-progress", "--quote", "none", filepath.Join(dir, "escape.csv")); !strings.Contains(out, `quote none, escape none`) {
		t.Errorf("inspect --quote none:\n%s", out)
	}
	for _, c := range [][]string{{"--quote", "ab"}, {"--escape", "none"}, {"--comment", "//"}} {
		if r := run(t, append([]string{"cat", "--no-progress"}, append(c, p)...)...); r.code != 2 || !strings.Contains(r.stderr, c[0]) {
			t.Errorf("cat %v: exit %d, stderr %q", c, r.code, r.stderr)
		}
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
