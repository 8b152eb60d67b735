package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// inspect takes --invalid-utf8 as cat does: its sample reads a CSV header
// name or a JSON key that is not UTF-8 with U+FFFD where asked, and fails
// (CSV) naming the flag where not.
func TestInspectInvalidUTF8(t *testing.T) {
	dir := t.TempDir()
	csv := filepath.Join(dir, "latin1.csv")
	jsonl := filepath.Join(dir, "latin1.jsonl")
	if err := os.WriteFile(csv, []byte("a,caf\xe9\n1,x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(jsonl, []byte("{\"a\":1,\"caf\xe9\":\"x\"}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fails(t, exitFailure, []string{"latin1.csv", "column 2 of 2", "--invalid-utf8 replace"}, "inspect", "--no-progress", csv)
	fails(t, exitFailure, []string{"latin1.jsonl", "not valid UTF-8", "--invalid-utf8 replace"}, "inspect", "--no-progress", jsonl)
	for _, p := range []string{csv, jsonl} {
		out := ok(t, "inspect", "--no-progress", "--invalid-utf8", "replace", p)
		if !strings.Contains(out, "caf\uFFFD") {
			t.Errorf("inspect --invalid-utf8 replace %s: no column caf\uFFFD in\n%s", filepath.Base(p), out)
		}
	}
	fails(t, exitUsage, []string{"--invalid-utf8"}, "inspect", csv, "--invalid-utf8", "ignore")
}
