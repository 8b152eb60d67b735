package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicedata/sluice/internal/testkit/corpus"
)

// cat and inspect read ORC files, and inspect says which have no row
// index.
func TestORCFiles(t *testing.T) {
	orcExamples := filepath.Join(corpus.Dir(t), "orc", "examples")
	out := ok(t, "cat", filepath.Join(orcExamples, "TestOrcFile.test1.orc"), "--columns", "int1,string1")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 {
		t.Fatalf("cat printed %d rows, want 2:\n%s", len(lines), out)
	}
	var row map[string]any
	if err := json.Unmarshal([]byte(lines[1]), &row); err != nil || row["string1"] != "bye" || row["int1"] != float64(65536) {
		t.Errorf("second row %s (%v)", lines[1], err)
	}

	without := filepath.Join(orcExamples, "TestOrcFile.testWithoutIndex.orc")
	rep := inspectJSON(t, without, "--num-splits", "4")
	if rep.Totals.Rows != 50000 || len(rep.ORCWithoutRowIndex) != 1 {
		t.Errorf("rows %d, files without a row index %v", rep.Totals.Rows, rep.ORCWithoutRowIndex)
	}
	if out := ok(t, "inspect", without, "--num-splits", "4"); !strings.Contains(out, "ORC files without a row index: 1") {
		t.Errorf("inspect does not say the file has no row index:\n%s", out)
	}
	with := filepath.Join(orcExamples, "TestOrcFile.testSeek.orc")
	if rep := inspectJSON(t, with, "--num-splits", "4"); len(rep.ORCWithoutRowIndex) != 0 || rep.Overlap.CutRowGroups != rep.Overlap.PagedRowGroups {
		t.Errorf("a file with a row index: %v, overlap %+v", rep.ORCWithoutRowIndex, rep.Overlap)
	}
}
