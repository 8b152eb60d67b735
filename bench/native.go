package main

import (
	"context"
	"fmt"
	"runtime"
	"strings"
)

// DuckDB's own speed: duckdb_native.mjs runs one aggregate over the columns
// a sluice line reads, of the files it reads (every value decoded, nothing
// handed out), on as many threads as the process's GOMAXPROCS. The
// sequential lines carry sluice's rows/s over it as ratio_vs_duckdb_native:
// how near sluice, which hands every batch to a caller, comes to the
// fastest reader of the same files on the same cores. duckdb_sequential
// (duckdb.mjs) is the other comparison: DuckDB handing batches out too.

// nativeTarget is the least ratio_vs_duckdb_native the sequential lines
// are meant to reach.
const nativeTarget = 0.8

// nativeRuns is DuckDB's aggregate over one set of files and columns, run
// once after each sluice run it is compared with.
type nativeRuns struct {
	e       *env
	files   []string
	columns []string // nil: all of the files' columns
	rows    int64    // the rows the files hold
	best    *record  // the peer's line of its fastest run
	rates   []float64
	cpu     []float64 // rows per CPU second of each call's leanest run
	skipped string    // why DuckDB cannot run
	err     error
}

func (e *env) nativeRuns(files, columns []string, rows int64) *nativeRuns {
	n := &nativeRuns{e: e, files: files, columns: columns, rows: rows}
	switch {
	case e.peers == nil:
		n.skipped = "the Node.js peers were not looked for"
	case e.peers.missing != "":
		n.skipped = e.peers.missing
	}
	return n
}

// run runs the aggregate once more (the script times reps queries after
// an untimed one) unless DuckDB cannot run or failed before.
func (n *nativeRuns) run(ctx context.Context, reps int) {
	if n.skipped != "" || n.err != nil {
		return
	}
	args := []string{"--files", strings.Join(n.files, ","), "--threads", fmt.Sprint(runtime.GOMAXPROCS(0)), "--reps", fmt.Sprint(max(reps, 1))}
	if n.columns != nil {
		args = append(args, "--columns", strings.Join(n.columns, ","))
	}
	runtime.GC()
	r, err := n.e.peers.run(ctx, "duckdb_native.mjs", args...)
	if err == nil {
		if rows, _ := num(r.get("rows")); int64(rows) != n.rows {
			err = fmt.Errorf("duckdb_native counted %v rows, the files hold %d", r.get("rows"), n.rows)
		}
	}
	if err != nil {
		n.err = err
		return
	}
	rate, _ := num(r.get("rows_per_s"))
	if n.best == nil || rate > maxOf(n.rates) {
		n.best = r
	}
	n.rates = append(n.rates, rate)
	perCPU, _ := num(r.get("rows_per_cpu_s"))
	n.cpu = append(n.cpu, perCPU)
}

// annotate adds DuckDB's figures to a sluice line r of the same files and
// columns, and the target on their ratio; a DuckDB that could not run
// leaves a reason instead, and one that failed fails the harness's run.
func (n *nativeRuns) annotate(r *record) {
	switch {
	case n.skipped != "":
		r.set("duckdb_native_skipped", "run "+setupCommand+" ("+n.skipped+")")
		return
	case n.err != nil:
		r.set("duckdb_native_error", n.err.Error())
		n.e.failed = append(n.e.failed, fmt.Errorf("%s: duckdb_native: %w", r.str("scenario"), n.err))
		return
	case n.best == nil:
		return
	}
	rate := maxOf(n.rates)
	r.set("duckdb_native_rows_per_s", rate)
	r.set("duckdb_native_runs_rows_per_s", roundAll(n.rates))
	r.set("duckdb_native_threads", n.best.get("threads"))
	r.set("duckdb_native_query", n.best.get("query"))
	r.set("ratio_vs_duckdb_native", r.float("rows_per_s")/rate)
	// Rows per CPU second, DuckDB's threads and sluice's process alike:
	// on a machine whose neighbours take cores, what the work costs.
	if perCPU := maxOf(n.cpu); perCPU > 0 {
		r.set("duckdb_native_rows_per_cpu_s", perCPU)
		if own := r.float("rows_per_cpu_s"); own > 0 {
			r.set("cpu_ratio_vs_duckdb_native", own/perCPU)
		}
	}
	r.target("ratio_vs_duckdb_native", ">=", nativeTarget)
}

// nativeSample is the duckdb_native line of the peers scenario: DuckDB's
// aggregate over every column of the dataset, against sluice's sequential
// runs of the same stretch of time.
func (n *nativeRuns) peerSample(sluiceRates []float64) *peerSample {
	s := &peerSample{name: "duckdb_native", peer: "duckdb", matches: "sequential",
		method:      fmt.Sprintf("SELECT count(*), sum(...) FROM read_parquet([files]): an aggregate over the same columns, every value decoded, nothing handed out, %d threads", runtime.GOMAXPROCS(0)),
		sluiceRates: sluiceRates, skipped: n.skipped}
	if n.err != nil {
		s.err = n.err.Error()
	}
	if n.best != nil {
		s.best = n.best
		s.rates = n.rates
	}
	return s
}
