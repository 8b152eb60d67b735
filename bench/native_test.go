package main

import (
	"context"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicedata/sluice/internal/testkit/synth"
)

// TestDuckDBNative runs DuckDB's aggregate where the Node.js peers are set
// up: it counts every row of the files, sums every column asked for, and
// the sluice line it annotates gets the ratio and its target; a column the
// files lack fails the run instead of leaving the ratio out.
func TestDuckDBNative(t *testing.T) {
	ctx := context.Background()
	peers := findNodePeers(ctx, findPeersDir(""))
	if peers.missing != "" {
		t.Skip("the Node.js peers are not set up: " + peers.missing)
	}
	dir := t.TempDir()
	spec := synth.Spec{Files: 2, RowsPerFile: 3000, RowGroupRows: 1000, Seed: 1}
	if err := synth.WriteDir(dir, spec); err != nil {
		t.Fatal(err)
	}
	files := []string{filepath.Join(dir, synth.FileName(0)), filepath.Join(dir, synth.FileName(1))}
	e := &env{peers: peers}

	n := e.nativeRuns(files, nil, spec.Rows())
	n.run(ctx, 2)
	n.run(ctx, 1)
	if n.err != nil {
		t.Fatal(n.err)
	}
	if len(n.rates) != 2 {
		t.Fatalf("%d runs recorded, want 2", len(n.rates))
	}
	q, _ := n.best.get("query").(string)
	for _, want := range []string{"count(*)", `sum("id")`, `sum("x")`, `sum("label")`, `sum(strlen("s"))`} {
		if !strings.Contains(q, want) {
			t.Errorf("query %q lacks %s", q, want)
		}
	}
	r := newRecord("scenario").set("scenario", "sequential").set("rows_per_s", 1e6).set("rows_per_cpu_s", 2e6)
	n.annotate(r)
	if c := r.float("cpu_ratio_vs_duckdb_native"); c <= 0 || math.Abs(c-2e6/maxOf(n.cpu)) > 1e-3*c {
		t.Errorf("cpu_ratio_vs_duckdb_native is %g, DuckDB's rows per CPU second %v", c, n.cpu)
	}
	ratio := r.float("ratio_vs_duckdb_native")
	if want := 1e6 / maxOf(n.rates); math.Abs(ratio-want) > 1e-3*want { // set rounds
		t.Errorf("ratio_vs_duckdb_native is %g, want %g", ratio, want)
	}
	if r.str("target") != "ratio_vs_duckdb_native >= 0.8" || r.get("met") != (ratio >= 0.8) {
		t.Errorf("target %v, met %v for ratio %g", r.get("target"), r.get("met"), ratio)
	}

	bad := e.nativeRuns(files, []string{"id", "nope"}, spec.Rows())
	bad.run(ctx, 1)
	r = newRecord("scenario").set("scenario", "sequential").set("rows_per_s", 1e6)
	bad.annotate(r)
	if bad.err == nil || r.get("ratio_vs_duckdb_native") != nil || len(e.failed) != 1 {
		t.Errorf("a missing column: err %v, line %v, failed %v", bad.err, r, e.failed)
	}
	wrong := e.nativeRuns(files, []string{"id"}, spec.Rows()+1)
	if wrong.run(ctx, 1); wrong.err == nil {
		t.Error("a row count other than the files' was accepted")
	}
}
