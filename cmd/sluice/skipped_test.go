package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCatSkipBadRows checks that cat --skip-bad-rows prints the good rows
// on stdout and how many it skipped on stderr, and that without the flag
// the first bad row is an error naming its line.
func TestCatSkipBadRows(t *testing.T) {
	dir := t.TempDir()
	// Two ragged records: bad whatever the column types.
	body := "id,x\n1,1.5\n2,1.25\n3,2,extra\n4,2.5\n5\n6,3.5\n"
	path := filepath.Join(dir, "a.csv")
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	r := run(t, "cat", "--no-progress", "--skip-bad-rows", path)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if n := strings.Count(r.stdout, "\n"); n != 4 {
		t.Fatalf("%d rows on stdout, want 4:\n%s", n, r.stdout)
	}
	if !strings.Contains(r.stderr, "cat: 2 bad rows skipped") {
		t.Fatalf("stderr %q does not count the 2 bad rows", r.stderr)
	}
	r = run(t, "cat", "--no-progress", path)
	if r.code == 0 || !strings.Contains(r.stderr, "line 4") {
		t.Fatalf("without --skip-bad-rows: exit %d, stderr %q", r.code, r.stderr)
	}
}
