package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/sluicedata/sluice/internal/testkit/synth"
	"github.com/sluicedata/sluice/stream"
)

// The peers: other readers of the same Parquet files and columns, run in
// the same process tree and the same stretch of time as the sluice runs
// they are compared with. arrow-go is in this process; DuckDB and LanceDB
// are Node.js scripts under bench/peers, set up by setupCommand.

const setupCommand = "bash bench/peers/setup.sh"

// peerPackages are the npm packages the scripts need.
var peerPackages = []string{"@duckdb/node-api", "@lancedb/lancedb", "apache-arrow"}

// nodePeers is what running the Node.js peers needs, found once.
type nodePeers struct {
	dir      string            // bench/peers
	node     string            // the node executable
	missing  string            // why the peers cannot run; "" when they can
	versions map[string]string // npm package (and "node") to version
}

// findPeersDir returns dir if set, else the first of bench/peers and peers
// under the working directory, then the peers folder beside this source
// file (go run keeps its path), that holds a package.json.
func findPeersDir(dir string) string {
	if dir != "" {
		return dir
	}
	cands := []string{filepath.Join("bench", "peers"), "peers"}
	if _, src, _, ok := runtime.Caller(0); ok {
		cands = append(cands, filepath.Join(filepath.Dir(src), "peers"))
	}
	for _, c := range cands {
		if _, err := os.Stat(filepath.Join(c, "package.json")); err == nil {
			if abs, err := filepath.Abs(c); err == nil {
				return abs
			}
			return c
		}
	}
	return cands[0]
}

// findNodePeers checks that node runs and the packages are installed in dir.
func findNodePeers(ctx context.Context, dir string) *nodePeers {
	p := &nodePeers{dir: dir, versions: map[string]string{}}
	node, err := exec.LookPath("node")
	if err != nil {
		p.missing = "no node in PATH"
		return p
	}
	p.node = node
	for _, pkg := range peerPackages {
		raw, err := os.ReadFile(filepath.Join(dir, "node_modules", filepath.FromSlash(pkg), "package.json"))
		if err != nil {
			p.missing = fmt.Sprintf("%s is not installed in %s", pkg, filepath.Join(dir, "node_modules"))
			return p
		}
		var meta struct{ Version string }
		if json.Unmarshal(raw, &meta) == nil {
			p.versions[pkg] = meta.Version
		}
	}
	out, err := exec.CommandContext(ctx, node, "--version").Output()
	if err != nil {
		p.missing = fmt.Sprintf("node --version: %v", err)
		return p
	}
	p.versions["node"] = strings.TrimSpace(string(out))
	return p
}

// describe is the peers' setup for the machine line.
func (p *nodePeers) describe() string {
	if p.missing != "" {
		return "not available (" + p.missing + "; run " + setupCommand + ")"
	}
	parts := []string{"node " + p.versions["node"]}
	for _, pkg := range peerPackages {
		parts = append(parts, pkg+" "+p.versions[pkg])
	}
	return strings.Join(parts, ", ")
}

// run runs a peer script with args and returns the JSON line it printed.
func (p *nodePeers) run(ctx context.Context, script string, args ...string) (*record, error) {
	cmd := exec.CommandContext(ctx, p.node, append([]string{script}, args...)...)
	cmd.Dir = p.dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	r, err := parsePeerOutput(stdout.Bytes())
	if err == nil && runErr != nil {
		err = runErr
	}
	if err != nil {
		if tail := lastLines(stderr.String(), 5); tail != "" {
			err = fmt.Errorf("%w; stderr: %s", err, tail)
		}
		return nil, fmt.Errorf("node %s: %w", script, err)
	}
	return r, nil
}

// parsePeerOutput reads the one JSON line a peer script prints (lines that
// are not JSON objects, as warnings, are ignored) and checks it: an "error"
// field is returned as the error; otherwise rows, seconds and rows_per_s
// must be positive.
func parsePeerOutput(out []byte) (*record, error) {
	var found []*record
	for line := range strings.SplitSeq(string(out), "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "{") {
			continue
		}
		rs, err := loadRecords(strings.NewReader(line))
		if err != nil {
			return nil, fmt.Errorf("peer line %q: %w", line, err)
		}
		found = append(found, rs...)
	}
	if len(found) != 1 {
		return nil, fmt.Errorf("peer printed %d JSON lines, want 1", len(found))
	}
	r := found[0]
	if msg, ok := r.get("error").(string); ok {
		return nil, errors.New(lastLines(msg, 8))
	}
	for _, k := range []string{"rows", "seconds", "rows_per_s"} {
		if v, ok := num(r.get(k)); !ok || v <= 0 {
			return nil, fmt.Errorf("peer line: %s is %v, want a positive number", k, r.get(k))
		}
	}
	return r, nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

// columnNames are the columns every peer reads: all of the dataset's, as
// the sluice scenarios they are compared with (no Columns option) do.
func columnNames() []string {
	var cols []string
	for _, f := range synth.Schema.Fields() {
		cols = append(cols, f.Name)
	}
	return cols
}

// lanceTable is the dataset written as a Lance table, once per dataset
// directory: kept in its _lance folder (which sluice's listing skips), it
// is reused as long as the dataset is (-data) and the LanceDB version and
// columns match.
type lanceTable struct {
	db            string // the LanceDB database directory
	table         string
	cached        bool
	writeSeconds  float64 // LanceDB writing the table
	exportSeconds float64 // arrow-go exporting the Parquet files to Arrow IPC
}

type lanceMarker struct {
	LanceDB       string   `json:"lancedb"`
	Columns       []string `json:"columns"`
	Rows          int64    `json:"rows"`
	WriteSeconds  float64  `json:"write_seconds"`
	ExportSeconds float64  `json:"export_seconds"`
}

func (e *env) prepareLance(ctx context.Context) (*lanceTable, error) {
	root := filepath.Join(e.data.dir, "_lance")
	lt := &lanceTable{db: filepath.Join(root, "db"), table: "data"}
	markerPath := filepath.Join(root, "ready.json")
	want := lanceMarker{LanceDB: e.peers.versions["@lancedb/lancedb"], Columns: columnNames(), Rows: e.data.spec.Rows()}
	if raw, err := os.ReadFile(markerPath); err == nil {
		var got lanceMarker
		if json.Unmarshal(raw, &got) == nil && got.LanceDB == want.LanceDB && got.Rows == want.Rows &&
			strings.Join(got.Columns, ",") == strings.Join(want.Columns, ",") {
			lt.cached, lt.writeSeconds, lt.exportSeconds = true, got.WriteSeconds, got.ExportSeconds
			e.cfg.Log.Info("reusing Lance table", "dir", lt.db)
			return lt, nil
		}
	}
	e.cfg.Log.Info("writing Lance table", "dir", lt.db)
	if err := os.RemoveAll(root); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, err
	}
	src := filepath.Join(root, "source.arrow")
	defer os.Remove(src)
	start := time.Now()
	if err := exportArrow(ctx, e.data.files, src); err != nil {
		return nil, fmt.Errorf("export to Arrow IPC: %w", err)
	}
	lt.exportSeconds = time.Since(start).Seconds()
	r, err := e.peers.run(ctx, "lancedb.mjs", "--prepare", "--arrow", src, "--db", lt.db, "--table", lt.table)
	if err != nil {
		return nil, err
	}
	if rows, _ := num(r.get("rows")); int64(rows) != want.Rows {
		return nil, fmt.Errorf("the Lance table has %v rows, the dataset %d", r.get("rows"), want.Rows)
	}
	lt.writeSeconds, _ = num(r.get("seconds"))
	want.WriteSeconds, want.ExportSeconds = lt.writeSeconds, lt.exportSeconds
	raw, err := json.Marshal(want)
	if err == nil {
		err = os.WriteFile(markerPath, raw, 0o644)
	}
	return lt, err
}

// exportArrow writes every row of files, in order, to one Arrow IPC file:
// what LanceDB's JavaScript client (which reads no Parquet) writes the
// Lance table from.
func exportArrow(ctx context.Context, files []string, path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	var w *ipc.FileWriter
	for _, name := range files {
		if err := exportFile(ctx, name, f, &w); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	if w == nil {
		return errors.New("no files")
	}
	if err := w.Close(); err != nil {
		return err
	}
	return f.Close()
}

func exportFile(ctx context.Context, name string, f *os.File, w **ipc.FileWriter) error {
	pf, err := file.OpenParquetFile(name, false)
	if err != nil {
		return err
	}
	defer pf.Close()
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: 64 << 10}, memory.DefaultAllocator)
	if err != nil {
		return err
	}
	rr, err := fr.GetRecordReader(ctx, nil, nil)
	if err != nil {
		return err
	}
	defer rr.Release()
	for rr.Next() {
		rec := rr.RecordBatch()
		if *w == nil {
			if *w, err = ipc.NewFileWriter(f, ipc.WithSchema(rec.Schema())); err != nil {
				return err
			}
		}
		if err := (*w).Write(rec); err != nil {
			return err
		}
	}
	return rr.Err()
}

// peerLines are the lines of the peers scenario, in order.
var peerLines = []string{"arrowgo_sequential", "duckdb_sequential", "duckdb_native", "lancedb_sequential", "lancedb_shuffled", "lancedb_shuffled_clump16"}

// lanceMixClump is the clump of the LanceDB line whose mixing the mixing
// plots draw: issue 16 set the mixing target against it.
const lanceMixClump = 16

// peerSample is the runs of one peer line and of the sluice scenario it is
// compared with.
type peerSample struct {
	name, peer, matches string
	method              string  // how the peer reads, for the reports
	best                *record // the peer's line of its fastest run
	rates, sluiceRates  []float64
	skipped, err        string
}

func (s *peerSample) add(r *record) {
	rate, _ := num(r.get("rows_per_s"))
	if s.best == nil || rate > maxOf(s.rates) {
		s.best = r
	}
	s.rates = append(s.rates, rate)
}

func maxOf(xs []float64) float64 {
	m := 0.0
	for _, x := range xs {
		m = max(m, x)
	}
	return m
}

// peersScenario runs every peer cfg.PeerReps times, each run next to a run
// of the sluice scenario it matches (sequential with defaults, or shuffled
// with Seed 42 and the default clump), and reports the fastest of each and
// their ratio, sluice_ratio = sluice rows/s / peer rows/s: above 1, sluice
// is faster. Peers that cannot run get a line saying so; a peer that fails
// gets a line with its error and fails the run at the end.
func (e *env) peersScenario(ctx context.Context) error {
	cols := strings.Join(columnNames(), ",")
	bs := fmt.Sprint(e.cfg.BatchSize)
	const seed, clump = 42, 1 // the shuffled scenario's
	samples := map[string]*peerSample{
		"arrowgo_sequential": {peer: "arrow-go", matches: "sequential",
			method: "pqarrow record reader, file after file, 1 goroutine (the floor)"},
		"duckdb_sequential": {peer: "duckdb", matches: "sequential",
			method: "read_parquet('DIR/*.parquet'), streamed with fetchChunk"},
		"lancedb_sequential": {peer: "lancedb", matches: "sequential",
			method: "Lance table, query().select(columns) streamed"},
		"lancedb_shuffled": {peer: "lancedb", matches: "shuffled",
			method: fmt.Sprintf("permutationBuilder(table).shuffle({seed: %d, clumpSize: %d}), takeRowIds per batch, 2 in flight", seed, clump)},
		"lancedb_shuffled_clump16": {peer: "lancedb", matches: "shuffled",
			method: fmt.Sprintf("permutationBuilder(table).shuffle({seed: %d, clumpSize: %d}), takeRowIds per batch, 2 in flight; mixing of the batches by id, as the bench's meter", seed, lanceMixClump)},
	}
	for name, s := range samples {
		s.name = name
	}
	if e.peers.missing != "" {
		for _, s := range samples {
			if s.peer != "arrow-go" {
				s.skipped = e.peers.missing
			}
		}
	}
	native := e.nativeRuns(e.data.files, columnNames(), e.data.spec.Rows())
	var lance *lanceTable
	if e.peers.missing == "" {
		e.cfg.Progress.status("peers: Lance table")
		var err error
		if lance, err = e.prepareLance(ctx); err != nil {
			samples["lancedb_sequential"].err = err.Error()
			samples["lancedb_shuffled"].err = err.Error()
			samples["lancedb_shuffled_clump16"].err = err.Error()
		}
	}
	seqOpts := e.opts()
	shufOpts := e.opts()
	shufOpts.Shuffle, shufOpts.Seed = true, seed // and the default clump, 1: the shuffled scenario's options
	sluiceRun := func(o stream.Options) (float64, error) {
		runtime.GC()
		m, err := measureStream(ctx, streamRun{urls: []string{e.data.dir}, opts: o})
		if err == nil {
			err = expectRows(m, e.data.spec.Rows())
		}
		return m.rowsPerSec(), err
	}
	reps := max(e.cfg.PeerReps, 1)
	rep := 0
	status := func(what string) { e.cfg.Progress.status(fmt.Sprintf("peers, run %d of %d: %s", rep+1, reps, what)) }
	nodeRun := func(s *peerSample, script string, args ...string) {
		if s.skipped != "" || s.err != "" {
			return
		}
		status(s.name)
		runtime.GC()
		r, err := e.peers.run(ctx, script, args...)
		if err == nil && r.get("complete") != false {
			if rows, _ := num(r.get("rows")); int64(rows) != e.data.spec.Rows() {
				err = fmt.Errorf("%s read %v rows, the dataset has %d", s.name, r.get("rows"), e.data.spec.Rows())
			}
		}
		if err != nil {
			s.err = err.Error()
			return
		}
		s.add(r)
	}
	var seqRates, shufRates []float64
	for rep = range reps {
		if err := ctx.Err(); err != nil {
			return err
		}
		status("arrowgo_sequential")
		runtime.GC()
		m, err := measureFloor(ctx, e.data.files, e.cfg.BatchSize)
		if err == nil {
			err = expectRows(m, e.data.spec.Rows())
		}
		if err != nil {
			return err
		}
		r := newRecord("peer")
		r.set("rows", m.rows).set("seconds", m.seconds).set("rows_per_s", m.rowsPerSec())
		r.set("cpu_seconds", m.cpuSeconds).set("goroutines", 1)
		samples["arrowgo_sequential"].add(r)

		status("sluice sequential")
		rate, err := sluiceRun(seqOpts)
		if err != nil {
			return err
		}
		seqRates = append(seqRates, rate)
		nodeRun(samples["duckdb_sequential"], "duckdb.mjs", "--data", e.data.dir, "--columns", cols, "--batch-size", bs)
		status("duckdb_native")
		native.run(ctx, 1)
		if lance != nil {
			nodeRun(samples["lancedb_sequential"], "lancedb.mjs", "--scenario", "sequential", "--db", lance.db,
				"--table", lance.table, "--columns", cols, "--batch-size", bs)
		}
		status("sluice shuffled")
		if rate, err = sluiceRun(shufOpts); err != nil {
			return err
		}
		shufRates = append(shufRates, rate)
		if lance != nil {
			args := []string{"--scenario", "shuffled", "--db", lance.db, "--table", lance.table, "--columns", cols,
				"--batch-size", bs, "--seed", fmt.Sprint(seed), "--clump-size", fmt.Sprint(clump), "--prefetch", "2"}
			if e.cfg.PeerShuffleSeconds > 0 {
				args = append(args, "--max-seconds", fmt.Sprint(e.cfg.PeerShuffleSeconds))
			}
			nodeRun(samples["lancedb_shuffled"], "lancedb.mjs", args...)
			args = append(args, "--mixing-rows", fmt.Sprint(e.data.spec.Rows()))
			args[slices.Index(args, "--clump-size")+1] = fmt.Sprint(lanceMixClump)
			nodeRun(samples["lancedb_shuffled_clump16"], "lancedb.mjs", args...)
		}
	}
	samples["duckdb_native"] = native.peerSample(seqRates)
	for _, name := range peerLines {
		s := samples[name]
		sl := seqRates
		if s.matches == "shuffled" {
			sl = shufRates
		}
		s.sluiceRates = sl
		var extra map[string]any
		if lance != nil && s.peer == "lancedb" {
			extra = map[string]any{
				"lance_table_cached":   lance.cached,
				"lance_write_seconds":  lance.writeSeconds,
				"arrow_export_seconds": lance.exportSeconds,
			}
		}
		if err := e.emit(e.peerRecord(s, extra)); err != nil {
			return err
		}
		if s.err != "" {
			e.failed = append(e.failed, fmt.Errorf("%s: %s", name, s.err))
		}
	}
	return nil
}

// peerRecord is the line of a peer: its fastest run, the matching sluice
// scenario's fastest run in the same stretch of time, their ratio, then
// the peer's own fields.
func (e *env) peerRecord(s *peerSample, extra map[string]any) *record {
	r := newRecord("scenario").set("scenario", s.name).set("peer", s.peer)
	switch {
	case s.skipped != "":
		r.set("skipped", "run "+setupCommand)
		r.set("skip_reason", s.skipped)
		return r
	case s.best == nil:
		r.set("error", s.err)
		return r
	}
	rate := maxOf(s.rates)
	sluice := maxOf(s.sluiceRates)
	rows, _ := num(s.best.get("rows"))
	secs, _ := num(s.best.get("seconds"))
	r.set("rows", int64(rows))
	r.set("seconds", secs)
	r.set("rows_per_s", rate)
	r.set("baseline_rows_per_s", e.floor)
	if e.floor > 0 {
		r.set("ratio_vs_baseline", rate/e.floor)
	}
	r.set("baseline", "floor scenario")
	r.set("matches", s.matches)
	r.set("sluice_rows_per_s", sluice)
	r.set("sluice_ratio", sluice/rate)
	r.set("runs_rows_per_s", roundAll(s.rates))
	r.set("sluice_runs_rows_per_s", roundAll(s.sluiceRates))
	r.set("method", s.method)
	if s.err != "" {
		r.set("error", s.err) // a later run failed
	}
	skip := map[string]bool{"peer": true, "scenario": true, "rows": true, "seconds": true, "rows_per_s": true, "kind": true}
	for _, k := range s.best.keys {
		if !skip[k] {
			r.set(k, s.best.vals[k])
		}
	}
	for _, k := range []string{"lance_table_cached", "lance_write_seconds", "arrow_export_seconds"} {
		if v, ok := extra[k]; ok {
			r.set(k, v)
		}
	}
	return r
}
