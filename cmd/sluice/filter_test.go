package main

import (
	"slices"
	"strings"
	"testing"
)

// The synth data is sorted on id (3 files of 4 row groups of 250 rows), so
// a range of ids rules out all row groups but the ones holding it.
func TestInspectFilter(t *testing.T) {
	rep := inspectJSON(t, dataDir, "--filter", "id >= 2750 AND label <> 3", "--columns", "x")
	p := rep.Pruning
	if p == nil {
		t.Fatal("inspect --json --filter has no pruning")
	}
	if p.Filter != `(("id" >= 2750) AND ("label" <> 3))` || p.RowGroups != 12 || p.PrunedRowGroups != 11 {
		t.Errorf("pruning = %+v, want 11 of 12 row groups pruned by the canonical filter", *p)
	}
	if p.PrunedBytes <= 0 || p.PrunedBytes >= p.Bytes {
		t.Errorf("pruned %d of %d bytes", p.PrunedBytes, p.Bytes)
	}
	last := rep.Files[2].RowGroups
	if last[3].Pruned || !last[2].Pruned || !rep.Files[0].RowGroups[0].Pruned {
		t.Errorf("pruned row groups: %+v", last)
	}
	if rep.Totals.Rows != -1 || last[3].Rows != -1 {
		t.Errorf("rows behind a filter: total %d, row group %d; want unknown (-1)", rep.Totals.Rows, last[3].Rows)
	}
	if len(rep.Schema) != 1 || rep.Schema[0].Name != "x" {
		t.Errorf("schema %+v: the filter's columns are read, not returned", rep.Schema)
	}
	plain := inspectJSON(t, dataDir, "--columns", "x")
	if plain.Plan == rep.Plan || plain.Fingerprint == rep.Fingerprint {
		t.Error("the filter is not part of the plan and order fingerprints")
	}
	same := inspectJSON(t, dataDir, "--filter", "(id>=2750) and NOT (label = 3)", "--columns", "x")
	if same.Plan == rep.Plan {
		t.Error("a different condition has the same fingerprint")
	}
	again := inspectJSON(t, dataDir, "--filter", "\"id\" >= 2750 and label != 3", "--columns", "x")
	if again.Plan != rep.Plan {
		t.Error("the same condition written otherwise has another fingerprint")
	}

	out := ok(t, "inspect", dataDir, "--filter", "id < 10", "--row-groups")
	for _, want := range []string{"filter: (\"id\" < 10)", "pruning skips 11 of 12 row groups", "row group 1 (pruned)"} {
		if !strings.Contains(out, want) {
			t.Errorf("inspect --filter output lacks %q:\n%s", want, out)
		}
	}
}

func TestCatFilter(t *testing.T) {
	got := catIDs(t, dataDir, "--filter", "id >= 2500 AND label IN (1, 2) OR id = 3")
	var want []int64
	for id := range spec.Rows() {
		l := spec.Label(id)
		if id >= 2500 && (l == 1 || l == 2) || id == 3 {
			want = append(want, id)
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("cat --filter: %d ids, want %d", len(got), len(want))
	}
	// Across ranks, shuffled: every passing row exactly once.
	var all []int64
	for r := range 3 {
		all = append(all, catIDs(t, dataDir, "--filter", "id >= 2500 AND label IN (1, 2) OR id = 3", "--shuffle", "--seed", "5", "--world-size", "3", "--rank", string(rune('0'+r)))...)
	}
	slices.Sort(all)
	if !slices.Equal(all, want) {
		t.Errorf("cat --filter over 3 ranks: %d ids, want %d", len(all), len(want))
	}
	fails(t, exitUsage, []string{"--filter", "offset 5", "expected"}, "cat", dataDir, "--filter", "id = AND")
	fails(t, exitFailure, []string{"nope"}, "cat", dataDir, "--filter", "nope = 1")
	fails(t, exitFailure, []string{`column "id"`, "'x' (offset 17)"}, "cat", dataDir, "--filter", "s > 'a' AND id = 'x'")
	fails(t, exitFailure, []string{"DropRemainder"}, "cat", dataDir, "--filter", "id < 5", "--drop-remainder")
}
