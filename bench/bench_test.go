package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/sluicedata/sluice/internal/testkit/scratch"
	"github.com/sluicedata/sluice/internal/testkit/synth"
	"github.com/sluicedata/sluice/stream"
)

// TestHarnessTiny runs every scenario on a few thousand rows and checks the
// lines: that they parse, carry the fields plots and reports rely on, and
// that a sequential epoch reads each stored byte once. The figures
// themselves mean nothing at this size.
func TestHarnessTiny(t *testing.T) {
	if raceEnabled && testing.Short() {
		// Every scenario under the detector took 216 s of CI's 20 minutes;
		// the library's goroutines are watched by its own tests, and CI
		// runs this one without -short and the detector (docs/testing.md).
		t.Skip("run without -race or without -short: CI's second pass does")
	}
	t.Parallel()
	cfg := tinyConfig()
	cfg.OutDir = t.TempDir()
	cfg.PeersDir = t.TempDir() // no node_modules: the Node.js peers are skipped
	cfg.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	var out bytes.Buffer
	procs := runtime.GOMAXPROCS(0)
	if _, err := run(context.Background(), cfg, &out); err != nil {
		t.Fatal(err)
	}
	if got := runtime.GOMAXPROCS(0); got != procs {
		t.Errorf("GOMAXPROCS is %d after the run, was %d: the scaling scenario did not restore it", got, procs)
	}

	lines := parseLines(t, out.Bytes())
	if len(lines) == 0 || lines[0]["kind"] != "machine" {
		t.Fatalf("first line is not of kind machine: %v", lines)
	}
	for _, k := range []string{"date", "go_version", "cores", "cpu_model", "dataset_rows", "peers"} {
		if _, ok := lines[0][k]; !ok {
			t.Errorf("machine line lacks %q", k)
		}
	}

	byName := map[string]map[string]any{}
	var trace map[string]any
	for _, l := range lines[1:] {
		name, _ := l["scenario"].(string)
		if name == "" {
			t.Errorf("line without a scenario: %v", l)
			continue
		}
		if l["kind"] == "trace" {
			trace = l
			continue
		}
		byName[name] = l
		if l["skipped"] != nil {
			want := "run " + setupCommand
			switch {
			case slices.Contains(objectStoreLines, name), slices.Contains(sharedPlanLines, name), slices.Contains(scaleLines, name):
				want = "run " + scratch.Setup
			case slices.Contains(pythonLines, name):
				want = "run " + pythonSetup
			case slices.Contains(scalingLines, name):
				want = "run on " + strings.TrimPrefix(strings.Split(name, "_")[1], "p") + " cores or more"
			}
			if l["skipped"] != want {
				t.Errorf("%s: skipped is %q", name, l["skipped"])
			}
			continue
		}
		fields := []string{"rows", "seconds", "rows_per_s", "baseline_rows_per_s", "ratio_vs_baseline", "io_amplification"}
		if l["peer"] != nil {
			fields = []string{"rows", "seconds", "rows_per_s", "sluice_rows_per_s", "sluice_ratio"}
		}
		if l["measure"] == "scale" {
			checkScale(t, name, l)
			continue
		}
		if l["measure"] == "latency" { // checkpoint saves, resumes, plans: times, not throughput
			fields = []string{"seconds"}
			if name == "checkpoint_save" {
				fields = []string{"p50_ms", "p99_ms"}
			}
		}
		for _, k := range fields {
			if v, ok := l[k].(float64); !ok || v <= 0 {
				t.Errorf("%s: field %q is %v, want a positive number", name, k, l[k])
			}
		}
		if _, ok := l["target"]; ok {
			if _, ok := l["met"].(bool); !ok {
				t.Errorf("%s: has a target but no boolean met", name)
			}
		}
	}
	for _, name := range []string{
		"floor", "sequential", "sequential_1goroutine", "shuffled", "sequential_2ranks", "shuffled_2ranks",
		"read_concurrency_1", "read_concurrency_2", "read_concurrency_4", "transform_1", "transform_2", "transform_4",
		"latency_0ms", "latency_20ms", "latency_20ms_read_concurrency_8", "latency_50ms", "latency_100ms", "memory_1x", "memory_4x",
		"scaling_p1_sequential", "scaling_p1_shuffled",
		"arrowgo_sequential", "duckdb_sequential", "duckdb_native", "lancedb_sequential", "lancedb_shuffled", "lancedb_shuffled_clump16", "take_random_1024", "mix_3sources",
		"s3_sequential", "s3_shuffled", "gcs_sequential", "gcs_shuffled", "azure_sequential", "azure_shuffled",
		"s3_cached_epoch2", "s3_cached_4ranks",
		"shared_plan_off", "shared_plan_on", "consumers_1", "consumers_2", "consumers_4", "scale_1024", "scale_1024_workers8",
		"python_numpy", "python_torch", "python_strings", "python_dataloader_workers",
		"pyarrow_sequential", "pyarrow_shuffled", "pyarrow_shuffled_mix15", "pyarrow_shuffled_mix05",
		"table131k_sequential", "table131k_shuffled", "table131k_shuffled_mix15", "table131k_shuffled_mix05",
		"avro_benchdata",
	} {
		if byName[name] == nil {
			t.Errorf("no line for scenario %s", name)
		}
	}
	for _, name := range []string{"duckdb_sequential", "duckdb_native", "lancedb_sequential", "lancedb_shuffled", "lancedb_shuffled_clump16"} {
		if byName[name]["skipped"] == nil {
			t.Errorf("%s ran without node_modules: %v", name, byName[name])
		}
	}
	for _, name := range []string{"sequential", "table_sequential_all", "table_sequential_idxlabel"} {
		if byName[name]["duckdb_native_skipped"] == nil || byName[name]["ratio_vs_duckdb_native"] != nil {
			t.Errorf("%s: DuckDB's aggregate without node_modules: %v", name, byName[name])
		}
	}
	if trace == nil {
		t.Error("no queue trace line")
	} else if ts, _ := trace["t_s"].([]any); len(ts) < 2 {
		t.Errorf("queue trace has %d samples", len(ts))
	}
	for name, fields := range map[string][]string{
		"transform_2":           {"speedup"},
		"transform_4":           {"speedup"},
		"latency_0ms":           {"peak_heap_bytes", "first_batch_seconds"},
		"latency_20ms":          {"ratio_vs_0ms", "steady_ratio_vs_0ms", "peak_heap_bytes", "peak_heap_vs_0ms", "fetch_latency_p50_seconds"},
		"latency_50ms":          {"ratio_vs_0ms", "peak_heap_bytes", "peak_heap_vs_0ms"},
		"latency_100ms":         {"ratio_vs_0ms", "ratio_vs_0ms_ceiling", "peak_heap_bytes", "peak_heap_vs_0ms", "unhidden_seconds"},
		"memory_1x":             {"peak_heap_bytes"},
		"memory_4x":             {"peak_heap_bytes", "ratio_4x"},
		"scaling_p1_sequential": {"gomaxprocs", "best_rows_per_s", "ratio_default_vs_best", "arrowgo_rows_per_s", "ratio_vs_arrowgo"},
		"scaling_p1_shuffled":   {"gomaxprocs", "best_rows_per_s", "ratio_default_vs_best"},
	} {
		for _, f := range fields {
			if v, ok := byName[name][f].(float64); !ok || v <= 0 {
				t.Errorf("%s: field %q is %v, want a positive number", name, f, byName[name][f])
			}
		}
	}
	for _, f := range []string{"iceberg_deletes.ratio_vs_parquet", "avro_benchdata.ratio_vs_parquet", "avro_benchdata.parquet_rows_per_s", "iceberg_plan_2000_files.cold_seconds", "iceberg_plan_2000_files.cached_seconds"} {
		name, field, _ := strings.Cut(f, ".")
		if v, ok := byName[name][field].(float64); !ok || v <= 0 {
			t.Errorf("%s: field %q is %v, want a positive number", name, field, byName[name][field])
		}
	}
	for _, name := range []string{"sequential", "sequential_1goroutine", "shuffled"} {
		if amp, _ := byName[name]["io_amplification"].(float64); amp > 1.05 {
			t.Errorf("%s: io_amplification %g > 1.05", name, amp)
		}
		if rows, _ := byName[name]["rows"].(float64); int64(rows) != cfg.Spec.Rows() {
			t.Errorf("%s: %v rows, the dataset has %d", name, rows, cfg.Spec.Rows())
		}
	}

	checkSplits64(t, byName)
	checkMixCost(t, byName)

	// The files hold the same lines, and a table row per scenario.
	jl, err := os.ReadFile(filepath.Join(cfg.OutDir, "results.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(jl, out.Bytes()) {
		t.Errorf("results.jsonl differs from stdout")
	}
	md, err := os.ReadFile(filepath.Join(cfg.OutDir, "results.md"))
	if err != nil {
		t.Fatal(err)
	}
	for name := range byName {
		if !strings.Contains(string(md), "| "+name+" |") {
			t.Errorf("results.md has no row for %s", name)
		}
	}
	for _, png := range []string{plotScenarios, plotRead, plotTransform, plotQueues, plotMixing, plotMixingSpeed} {
		checkPNG(t, filepath.Join(cfg.OutDir, png))
		if !strings.Contains(string(md), "("+png+")") {
			t.Errorf("results.md does not show %s", png)
		}
	}
}

// checkScale checks a line of the scale scenario: the figures the issue
// that asked for it names, a state of a merged step resumed exactly at
// both world sizes, and the footers read by the planner only.
func checkScale(t *testing.T, name string, l map[string]any) {
	t.Helper()
	if l["error"] != nil {
		t.Errorf("%s: %v", name, l["error"])
	}
	fields := []string{"ranks", "splits", "state_bytes", "merge_seconds", "plan_load_median_seconds",
		"plan_load_max_seconds", "meta_requests_per_rank", "plan_load_cpu_seconds"}
	if name == "scale_1024" {
		fields = append(fields, "plan_seconds", "first_batch_all_seconds", "planner_footer_reads", "save_step_seconds", "judge_seconds", "resume_requests_per_rank")
		if l["step_summary"] != true {
			t.Errorf("%s: the step has no summary: each resuming rank read every state", name)
		}
		// A difference of heaps, which the tests running beside this one
		// move either way: a number, not necessarily a positive one.
		if _, ok := l["rank_plan_bytes"].(float64); !ok {
			t.Errorf("%s: no rank_plan_bytes", name)
		}
		exact := 0
		for k, v := range l {
			if strings.HasPrefix(k, "resume_") && strings.HasSuffix(k, "_exact") {
				exact++
				if v != true {
					t.Errorf("%s: %s is %v", name, k, v)
				}
			}
		}
		if exact != 2 {
			t.Errorf("%s: %d resume_*_exact fields, want 2", name, exact)
		}
	} else {
		fields = append(fields, "consumers", "workers", "loader_state_bytes", "merged_loader_state_bytes")
	}
	for _, k := range fields {
		if v, ok := l[k].(float64); !ok || v <= 0 {
			t.Errorf("%s: field %q is %v, want a positive number", name, k, l[k])
		}
	}
	if v, ok := l["footer_reads_per_rank"].(float64); !ok || v != 0 {
		t.Errorf("%s: a rank that read the shared plan read %v footers", name, l["footer_reads_per_rank"])
	}
	// The listing and the plan read go out at once.
	if v, ok := l["open_round_trips"].(float64); !ok || v != 1 {
		t.Errorf("%s: a rank's Open waited %v round trips, want 1", name, l["open_round_trips"])
	}
}

// checkMixCost checks the mixcost scenario's mix and sweep lines: every
// one has its setting, its measured mixing and memory, the estimate's, and
// the ratios to the same data's sequential and default shuffled lines.
func checkMixCost(t *testing.T, byName map[string]map[string]any) {
	t.Helper()
	for _, name := range append(sweepLines(), "pyarrow_shuffled_mix15", "pyarrow_shuffled_mix05", "table131k_shuffled_mix15", "table131k_shuffled_mix05") {
		l := byName[name]
		if l == nil {
			t.Errorf("no line for %s", name)
			continue
		}
		for _, k := range []string{"mixing", "mixing_estimate", "peak_heap_bytes", "window_peak_estimate", "decoders_peak_estimate", "ratio_vs_sequential", "peak_heap_vs_shuffled", "shuffle_passes"} {
			if v, ok := l[k].(float64); !ok || v <= 0 {
				t.Errorf("%s: field %q is %v, want a positive number", name, k, l[k])
			}
		}
		if strings.Contains(name, "_sweep_") && l["family"] == nil {
			t.Errorf("%s: no family", name)
		}
	}
	// The estimate runs the order the stream runs: on the tiny data every
	// window is put in order, so it is the measured figure.
	for _, name := range sweepLines() {
		m, _ := byName[name]["mixing"].(float64)
		e, _ := byName[name]["mixing_estimate"].(float64)
		if math.Abs(m-e) > 0.002 {
			t.Errorf("%s: mixing %.4f, estimated %.4f", name, m, e)
		}
	}
}

// checkSplits64 checks the lines of the splits64 scenario: one per dataset
// and world size, each with its target, the plan of the page-indexed data
// reading cut row groups by pages and that of the same data without the
// index predicting them fetched whole (refetch_bytes: Overlap does not
// count on a walk of the pages, which the driver makes only where it
// saves enough, not on the tiny data), so that at every world size above
// 1 (where the sides of a cut are on different ranks) it reads more.
func checkSplits64(t *testing.T, byName map[string]map[string]any) {
	t.Helper()
	f := func(l map[string]any, k string) float64 { v, _ := l[k].(float64); return v }
	for _, name := range splitsLines {
		l := byName[name]
		if l == nil {
			t.Errorf("no line for scenario %s", name)
			continue
		}
		for _, k := range []string{"world_size", "num_splits", "row_group_rows", "cut_units", "overlap_io_amplification"} {
			if f(l, k) <= 0 {
				t.Errorf("%s: field %q is %v, want a positive number", name, k, l[k])
			}
		}
		if _, ok := l["refetch_bytes"].(float64); !ok {
			t.Errorf("%s: no refetch_bytes", name)
		}
		// Every cut row group is read by somebody: its pages, its index
		// or the walk of its headers.
		if f(l, "requests_per_boundary_row_group") <= 0 {
			t.Errorf("%s: requests_per_boundary_row_group is %v, want a positive number", name, l["requests_per_boundary_row_group"])
		}
		// The ranks past 0 read the shared plan.
		if w := f(l, "world_size"); (w > 1) != (f(l, "plan_store_bytes") > 0) {
			t.Errorf("%s: plan_store_bytes %v at world size %v", name, l["plan_store_bytes"], w)
		}
		paged := !strings.Contains(name, "_nopageindex_")
		if (l["page_index"] == true) != paged {
			t.Errorf("%s: page_index is %v", name, l["page_index"])
		}
		if _, ok := l["target"]; !ok || l["no_target"] != nil {
			t.Errorf("%s: target %v, no_target %v: want a target on every line", name, l["target"], l["no_target"])
		}
		// Row groups without a page index are read by pages too: their
		// footers count many pages a chunk, which a read finds by walking
		// their headers.
		if f(l, "paged_units") != f(l, "cut_units") || f(l, "refetch_bytes") != 0 {
			t.Errorf("%s: %v of %v cut units read by pages, refetch_bytes %v: want all, and 0", name, l["paged_units"], l["cut_units"], l["refetch_bytes"])
		}
	}
	for _, w := range splitsWorlds[1:] {
		with, without := byName[splitsLine("pageindex", w)], byName[splitsLine("nopageindex", w)]
		if with == nil || without == nil {
			continue
		}
		if a, b := f(with, "io_amplification"), f(without, "io_amplification"); a >= b {
			t.Errorf("world %d: io_amplification %g with a page index, %g without: want less with", w, a, b)
		}
	}
}

func parseLines(t *testing.T, out []byte) []map[string]any {
	t.Helper()
	var lines []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		var l map[string]any
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		lines = append(lines, l)
	}
	return lines
}

func TestSelectScenarios(t *testing.T) {
	got, err := selectScenarios([]string{"transform_2", " shuffled"})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range got {
		names = append(names, s.name)
	}
	if want := "floor shuffled transform"; strings.Join(names, " ") != want {
		t.Errorf("selected %q, want %q", names, want)
	}
	if _, err := selectScenarios([]string{"nope"}); err == nil {
		t.Error("an unknown scenario was accepted")
	}
}

func TestSweepReadConcurrency(t *testing.T) {
	for procs, want := range map[int][]int{1: {1, 2}, 2: {1, 2, 4}, 3: {1, 3, 6}, 16: {1, 8, 16, 32}} {
		if got := sweepReadConcurrency(procs); !slices.Equal(got, want) {
			t.Errorf("sweep at %d: %v, want %v", procs, got, want)
		}
	}
}

// measureArrowGo reads every row once on any number of goroutines, by
// files where there are enough and by row groups where there are not.
func TestMeasureArrowGo(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	spec := synth.Spec{Files: 3, RowsPerFile: 2000, RowGroupRows: 500, Seed: 1}
	if err := synth.WriteDir(dir, spec); err != nil {
		t.Fatal(err)
	}
	var files []string
	for i := range spec.Files {
		files = append(files, filepath.Join(dir, synth.FileName(i)))
	}
	for _, g := range []int{1, 2, 3, 5, 16} {
		m, err := measureArrowGo(context.Background(), files, 128, g)
		if err != nil {
			t.Fatalf("%d goroutines: %v", g, err)
		}
		if m.rows != spec.Rows() {
			t.Errorf("%d goroutines: %d rows, want %d", g, m.rows, spec.Rows())
		}
	}
	if _, err := measureArrowGo(context.Background(), append(files, filepath.Join(dir, "missing.parquet")), 128, 8); err == nil {
		t.Error("a missing file was not reported")
	}
}

func TestCLIRejectsBadFlags(t *testing.T) {
	for _, args := range [][]string{{"-quick", "-tiny"}, {"-reps", "-1"}, {"extra"}, {"-scenarios", "nope", "-tiny"}} {
		if err := cli(args, io.Discard, io.Discard); err == nil {
			t.Errorf("cli(%q) succeeded", args)
		}
	}
}

// The benchmarks below read one dataset, written once per process, the
// floor's way and sluice's, for profiles of one path at a time:
//
//	go test ./bench -run '^$' -bench Shuffled -cpuprofile cpu.out
//	go tool pprof -top -cum bench.test cpu.out
var (
	benchOnce sync.Once
	benchDir  string
	benchErr  error
	benchSpec = synth.Spec{Files: 2, RowsPerFile: 250_000, RowGroupRows: 32_768, Seed: 1}
)

func benchData(b *testing.B) (dir string, files []string) {
	b.Helper()
	benchOnce.Do(func() {
		benchDir, benchErr = os.MkdirTemp("", "sluice-bench-test-")
		if benchErr == nil {
			benchErr = synth.WriteDir(benchDir, benchSpec)
		}
	})
	if benchErr != nil {
		b.Fatal(benchErr)
	}
	for i := range benchSpec.Files {
		files = append(files, filepath.Join(benchDir, synth.FileName(i)))
	}
	return benchDir, files
}

func TestMain(m *testing.M) {
	if cachedRankChild() { // a rank of s3_cached_4ranks, run by TestHarnessTiny
		os.Exit(0)
	}
	code := m.Run()
	if benchDir != "" {
		os.RemoveAll(benchDir)
	}
	if icebergData.dir != "" {
		os.RemoveAll(icebergData.dir)
	}
	os.Exit(code)
}

func reportRows(b *testing.B, m measurement) {
	b.ReportMetric(float64(m.rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}

func BenchmarkFloor(b *testing.B) {
	_, files := benchData(b)
	var m measurement
	for b.Loop() {
		var err error
		if m, err = measureFloor(context.Background(), files, 1024); err != nil {
			b.Fatal(err)
		}
	}
	reportRows(b, m)
}

func benchmarkStream(b *testing.B, o stream.Options) {
	dir, _ := benchData(b)
	o.BatchSize = 1024
	var m measurement
	var rows int64
	var cpu float64
	for b.Loop() {
		var err error
		if m, err = measureStream(context.Background(), streamRun{urls: []string{dir}, opts: o}); err != nil {
			b.Fatal(err)
		}
		rows, cpu = rows+m.rows, cpu+m.cpuSeconds
	}
	reportRows(b, m)
	// Rows per CPU second of the whole process: what a change of the
	// per-batch work shows on a shared machine, where rows/s follows the
	// neighbours.
	if cpu > 0 {
		b.ReportMetric(float64(rows)/cpu, "rows/cpu-s")
	}
}

func BenchmarkSequential(b *testing.B) { benchmarkStream(b, stream.Options{}) }

func BenchmarkSequential1Goroutine(b *testing.B) {
	benchmarkStream(b, stream.Options{Limits: stream.Limits{ReadConcurrency: 1, TransformConcurrency: 1}})
}

func BenchmarkShuffled(b *testing.B) { benchmarkStream(b, stream.Options{Shuffle: true, Seed: 42}) }
