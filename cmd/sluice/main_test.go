package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/sluicedata/sluice/checkpoint"
	"github.com/sluicedata/sluice/checkpoint/pebblestore"
	"github.com/sluicedata/sluice/formats"
	"github.com/sluicedata/sluice/internal/testkit/corpus"
	"github.com/sluicedata/sluice/internal/testkit/synth"
	"github.com/sluicedata/sluice/stream"
)

// The tests run the real binary, built once, on real Parquet files: what
// they check is what a user sees (stdout, one-line errors, exit codes).
var (
	bin     string
	dataDir string
	spec    = synth.Spec{Files: 3, RowsPerFile: 1000, RowGroupRows: 250, Seed: 1}
)

func TestMain(m *testing.M) {
	flag.Parse()
	if w := flag.Lookup("test.fuzzworker"); w != nil && w.Value.String() == "true" {
		// A fuzz worker runs only the fuzz target: no binary, no data.
		os.Exit(m.Run())
	}
	tmp, err := os.MkdirTemp("", "sluice-cli-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := func() int {
		defer os.RemoveAll(tmp)
		bin = filepath.Join(tmp, "sluice")
		// No symbol table or DWARF: the race-enabled binary links a third faster.
		args := []string{"build", "-ldflags=-s -w", "-o", bin}
		// The race detector made every start of the binary seconds long,
		// and these tests start it hundreds of times: most of CI's time in
		// this package. The goroutines that meet in a run are the library's,
		// raced in their own packages, so -short builds the command plain;
		// a full -race run races it too.
		if raceEnabled && !testing.Short() {
			args = append(args, "-race")
		}
		out, err := exec.Command("go", append(args, ".")...).CombinedOutput()
		if err != nil {
			fmt.Fprintf(os.Stderr, "go build: %v\n%s", err, out)
			return 1
		}
		dataDir = filepath.Join(tmp, "data")
		if err := synth.WriteDir(dataDir, spec); err != nil {
			fmt.Fprintln(os.Stderr, "write dataset:", err)
			return 1
		}
		return m.Run()
	}()
	os.Exit(code)
}

type result struct {
	stdout, stderr string
	code           int
}

func run(t *testing.T, args ...string) result {
	t.Helper()
	return runEnv(t, nil, args...)
}

func runEnv(t *testing.T, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	// A race-enabled binary sleeps a second at exit (ThreadSanitizer's
	// atexit_sleep_ms) unless told not to; the tests start it dozens of times.
	cmd.Env = append(os.Environ(), "GORACE="+strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	cmd.Env = append(cmd.Env, env...)
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	err := cmd.Run()
	r := result{stdout: so.String(), stderr: se.String()}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	case err != nil:
		t.Fatalf("sluice %s: %v", strings.Join(args, " "), err)
	}
	return r
}

// ok runs a command that must succeed and returns its stdout.
func ok(t *testing.T, args ...string) string {
	t.Helper()
	r := run(t, args...)
	if r.code != 0 {
		t.Fatalf("sluice %s: exit %d, stderr:\n%s", strings.Join(args, " "), r.code, r.stderr)
	}
	return r.stdout
}

// fails runs a command that must fail with code and print one line of
// error, "sluice: <cmd>: ...", containing every one of want.
func fails(t *testing.T, code int, want []string, args ...string) result {
	t.Helper()
	r := run(t, args...)
	if r.code != code {
		t.Fatalf("sluice %s: exit %d, want %d; stdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.code, code, r.stdout, r.stderr)
	}
	checkOneLine(t, r.stderr, want...)
	return r
}

func checkOneLine(t *testing.T, stderr string, want ...string) {
	t.Helper()
	if strings.Count(stderr, "\n") != 1 || !strings.HasSuffix(stderr, "\n") || !strings.HasPrefix(stderr, "sluice: ") {
		t.Fatalf("stderr is not one line starting with \"sluice: \":\n%q", stderr)
	}
	for _, w := range want {
		if !strings.Contains(stderr, w) {
			t.Errorf("stderr %q does not contain %q", stderr, w)
		}
	}
}

func TestHelp(t *testing.T) {
	out := ok(t, "--help")
	for _, w := range []string{"inspect", "cat", "checkpoint", "bench", "Exit status", "  3 ", "130"} {
		if !strings.Contains(out, w) {
			t.Errorf("sluice --help lacks %q", w)
		}
	}
	for _, c := range []string{"inspect", "cat", "checkpoint", "bench"} {
		for _, args := range [][]string{{c, "--help"}, {c, "-h"}, {"help", c}} {
			out := ok(t, args...)
			if !strings.Contains(out, "sluice "+c) {
				t.Errorf("sluice %s: no usage line for %s:\n%s", strings.Join(args, " "), c, out)
			}
		}
	}
	if out := ok(t, "cat", "--help"); !strings.Contains(out, "--limit N") || !strings.Contains(out, "--columns names") {
		t.Errorf("cat --help does not list its flags:\n%s", out)
	}
	if out := ok(t, "checkpoint", "ls", "--help"); !strings.Contains(out, "--run is required") {
		t.Errorf("checkpoint ls --help does not say --run is required:\n%s", out)
	}
	if r := run(t); r.code != exitUsage || !strings.Contains(r.stderr, "Commands:") {
		t.Errorf("sluice without arguments: exit %d, stderr %q", r.code, r.stderr)
	}
}

func TestUsageErrors(t *testing.T) {
	fails(t, exitUsage, []string{`unknown command "frob"`}, "frob")
	fails(t, exitUsage, []string{"sluice: cat: ", "unknown flag --bogus", "sluice cat --help"}, "cat", dataDir, "--bogus")
	fails(t, exitUsage, []string{"no data URL"}, "inspect")
	fails(t, exitUsage, []string{"--num-splits 3", "--world-size 2"}, "inspect", dataDir, "--num-splits", "3", "--world-size", "2")
	fails(t, exitUsage, []string{"--rank 2"}, "cat", dataDir, "--rank", "2", "--world-size", "2")
	fails(t, exitUsage, []string{"chunk-bytes"}, "inspect", dataDir, "--chunk-bytes", "lots")
	fails(t, exitUsage, []string{"limit"}, "cat", dataDir, "--limit", "-5")
	fails(t, exitUsage, []string{"--run"}, "cat", dataDir, "--checkpoint", t.TempDir())
	fails(t, exitUsage, []string{"subcommand"}, "checkpoint")
	fails(t, exitUsage, []string{`unknown subcommand "cp"`}, "checkpoint", "cp", "--run", "r", "x")
	fails(t, exitUsage, []string{"--run is required"}, "checkpoint", "ls", t.TempDir())
	fails(t, exitUsage, []string{"STORE"}, "checkpoint", "show", "--run", "r")
	fails(t, exitUsage, []string{"exactly one of --step and --keep"}, "checkpoint", "rm", "--run", "r", t.TempDir())
	fails(t, exitUsage, []string{"exactly one of --step and --keep"}, "checkpoint", "rm", "--run", "r", "--step", "1", "--keep", "1", t.TempDir())
	fails(t, exitUsage, []string{"--keep 0"}, "checkpoint", "rm", "--run", "r", "--keep", "0", t.TempDir())
}

func TestBadData(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "x.parquet")
	if err := os.WriteFile(bad, bytes.Repeat([]byte("not parquet at all "), 50), 0o644); err != nil {
		t.Fatal(err)
	}
	// A directory with one bad file among good ones: the error names the
	// bad one.
	mixed := filepath.Join(dir, "mixed")
	if err := os.MkdirAll(mixed, 0o755); err != nil {
		t.Fatal(err)
	}
	copyFile(t, filepath.Join(dataDir, synth.FileName(0)), filepath.Join(mixed, "a.parquet"))
	copyFile(t, bad, filepath.Join(mixed, "b.parquet"))
	// A directory without data files is as not-found as a missing path.
	empty := filepath.Join(dir, "empty")
	if err := os.MkdirAll(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "nothing-here")
	for _, c := range []string{"inspect", "cat"} {
		fails(t, exitNotFound, []string{"sluice: " + c + ": ", missing}, c, missing)
		fails(t, exitNotFound, []string{empty}, c, empty, "--no-progress")
		fails(t, exitFailure, []string{"x.parquet", "corrupt"}, c, bad)
		fails(t, exitFailure, []string{"b.parquet"}, c, mixed)
		fails(t, exitFailure, []string{`"nope"`}, c, dataDir, "--columns", "id,nope")
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestBadDataCorpus runs the malformed files of apache/parquet-testing
// through inspect and cat: each is refused with a one-line error naming it
// (exit 1), or read (exit 0). A panic would exit 2.
func TestBadDataCorpus(t *testing.T) {
	root := filepath.Join(corpus.Dir(t), "parquet-testing", "bad_data")
	files, _ := filepath.Glob(filepath.Join(root, "*.parquet"))
	if len(files) == 0 {
		t.Fatalf("no files under %s", root)
	}
	refused := 0
	for _, f := range files {
		name := filepath.Base(f)
		for _, c := range []string{"inspect", "cat"} {
			r := run(t, c, f)
			switch r.code {
			case exitOK:
			case exitFailure:
				refused++
				checkOneLine(t, r.stderr, name)
			default:
				t.Errorf("sluice %s %s: exit %d, stderr:\n%s", c, name, r.code, r.stderr)
			}
		}
	}
	if refused == 0 {
		t.Errorf("none of %d malformed files was refused", len(files))
	}
	// This one's footer is damaged: even inspect must refuse it.
	if p := filepath.Join(root, "PARQUET-1481.parquet"); fileExists(p) {
		fails(t, exitFailure, []string{"PARQUET-1481.parquet"}, "inspect", p)
	}
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func inspectJSON(t *testing.T, args ...string) inspectReport {
	t.Helper()
	var rep inspectReport
	out := ok(t, append([]string{"inspect", "--json"}, args...)...)
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("inspect --json output does not parse: %v\n%s", err, out)
	}
	return rep
}

func TestInspect(t *testing.T) {
	out := ok(t, "inspect", dataDir, "--num-splits", "4", "--world-size", "2")
	for _, w := range []string{"3 files", "3000 rows", "12 row groups", "part-00000.parquet", "plan fingerprint:", "order fingerprint:", "RANK  SPLITS"} {
		if !strings.Contains(out, w) {
			t.Errorf("inspect output lacks %q:\n%s", w, out)
		}
	}

	rep := inspectJSON(t, "--num-splits", "4", dataDir, "--world-size", "2", "--shuffle", "--seed", "3")
	if rep.Totals.Files != 3 || rep.Totals.Rows != spec.Rows() || rep.Totals.RowGroups != 12 || len(rep.Files) != 3 {
		t.Errorf("totals %+v, %d files", rep.Totals, len(rep.Files))
	}
	if len(rep.Splits) != 4 || len(rep.Ranks) != 2 {
		t.Fatalf("%d splits and %d ranks, want 4 and 2", len(rep.Splits), len(rep.Ranks))
	}
	var sum, rankSum int64
	for _, s := range rep.Splits {
		sum += s.Rows
		if s.Rank != s.Split%2 {
			t.Errorf("split %d owned by rank %d", s.Split, s.Rank)
		}
		var pieces int64
		for _, p := range s.Pieces {
			pieces += p.End - p.Start
		}
		if pieces != s.Rows {
			t.Errorf("split %d: pieces hold %d rows, split says %d", s.Split, pieces, s.Rows)
		}
	}
	for _, r := range rep.Ranks {
		rankSum += r.Rows
	}
	if sum != spec.Rows() || rankSum != spec.Rows() || rep.Totals.EpochRows != spec.Rows() {
		t.Errorf("splits hold %d rows, ranks %d, epoch %d; the dataset has %d", sum, rankSum, rep.Totals.EpochRows, spec.Rows())
	}

	// What the library itself plans with the same options.
	ds, err := stream.Open(context.Background(), stream.Options{URLs: []string{dataDir}, NumSplits: 4, WorldSize: 2, Shuffle: true, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	if rep.Plan != ds.Fingerprint() || rep.Fingerprint != ds.StateDict().Fingerprint {
		t.Errorf("fingerprints %s %s, the library's %s %s", rep.Plan, rep.Fingerprint, ds.Fingerprint(), ds.StateDict().Fingerprint)
	}
	for s, sp := range ds.Splits() {
		if rep.Splits[s].Rows != sp.Rows || len(rep.Splits[s].Pieces) != len(sp.Pieces) {
			t.Errorf("split %d: %d rows in %d pieces, the library has %d in %d", s, rep.Splits[s].Rows, len(rep.Splits[s].Pieces), sp.Rows, len(sp.Pieces))
		}
	}

	// The world size decides ownership, never the splits or the fingerprint.
	one := inspectJSON(t, dataDir, "--num-splits", "4", "--shuffle", "--seed", "3")
	if one.Fingerprint != rep.Fingerprint || !slices.EqualFunc(one.Splits, rep.Splits, sameSplit) {
		t.Errorf("world size 1 plans differently from world size 2")
	}
	// Another epoch deals other pieces, with the same row counts.
	next := inspectJSON(t, dataDir, "--num-splits", "4", "--shuffle", "--seed", "3", "--epoch", "1")
	if slices.EqualFunc(next.Splits, rep.Splits, sameSplit) {
		t.Errorf("epochs 0 and 1 have the same shuffled splits")
	}
	for i := range next.Splits {
		if next.Splits[i].Rows != rep.Splits[i].Rows {
			t.Errorf("split %d: %d rows in epoch 1, %d in epoch 0", i, next.Splits[i].Rows, rep.Splits[i].Rows)
		}
	}
	if other := inspectJSON(t, dataDir, "--num-splits", "4", "--shuffle", "--seed", "4"); other.Fingerprint == rep.Fingerprint || other.Plan != rep.Plan {
		t.Errorf("another seed: fingerprint %s plan %s; seed 3: %s %s", other.Fingerprint, other.Plan, rep.Fingerprint, rep.Plan)
	}

	drop := inspectJSON(t, dataDir, "--num-splits", "7", "--drop-remainder")
	for _, s := range drop.Splits {
		if s.Rows != spec.Rows()/7 {
			t.Errorf("--drop-remainder: split %d has %d rows, want %d", s.Split, s.Rows, spec.Rows()/7)
		}
	}
	if drop.Totals.EpochRows != spec.Rows()/7*7 {
		t.Errorf("--drop-remainder: epoch rows %d", drop.Totals.EpochRows)
	}

	cols := inspectJSON(t, dataDir, "--columns", "label,id")
	if len(cols.Schema) != 2 || cols.Schema[0].Name != "label" || cols.Schema[1].Name != "id" {
		t.Errorf("--columns label,id: schema %+v", cols.Schema)
	}
	if !strings.Contains(ok(t, "inspect", dataDir, "--row-groups"), "row group 3") {
		t.Errorf("--row-groups lists no row groups")
	}
}

func sameSplit(a, b splitInfo) bool {
	return a.Rows == b.Rows && slices.Equal(a.Pieces, b.Pieces)
}

// catIDs runs cat --columns id and returns the ids in output order.
func catIDs(t *testing.T, args ...string) []int64 {
	t.Helper()
	out := ok(t, append([]string{"cat", "--columns", "id"}, args...)...)
	var ids []int64
	for line := range strings.Lines(out) {
		var row struct{ ID *int64 }
		if err := json.Unmarshal([]byte(line), &row); err != nil || row.ID == nil {
			t.Fatalf("line %q: %v", line, err)
		}
		ids = append(ids, *row.ID)
	}
	return ids
}

func TestCat(t *testing.T) {
	out := ok(t, "cat", dataDir, "--limit", "7", "--columns", "x,id,s")
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 7 {
		t.Fatalf("--limit 7 printed %d lines:\n%s", len(lines), out)
	}
	for i, line := range lines {
		if keys := objectKeys(t, line); !slices.Equal(keys, []string{"x", "id", "s"}) {
			t.Errorf("line %d has keys %v, want x, id, s in that order", i, keys)
		}
		var row struct {
			X  float64
			ID int64
			S  string
		}
		if err := json.Unmarshal([]byte(line), &row); err != nil || row.ID != int64(i) || len(row.S) != 16 {
			t.Errorf("line %d %q: %+v, %v", i, line, row, err)
		}
	}

	all := catIDs(t, dataDir)
	if !isIota(all, spec.Rows()) {
		t.Errorf("cat without --shuffle: %d ids, not 0..%d in order", len(all), spec.Rows()-1)
	}

	shuffled := catIDs(t, dataDir, "--shuffle", "--seed", "5", "--shuffle-window", "600")
	if slices.Equal(shuffled, all) {
		t.Errorf("--shuffle did not change the order")
	}
	if !isIota(slices.Sorted(slices.Values(shuffled)), spec.Rows()) {
		t.Errorf("--shuffle changed the set of rows")
	}
	if again := catIDs(t, "--shuffle", dataDir, "--seed", "5", "--shuffle-window", "600"); !slices.Equal(again, shuffled) {
		t.Errorf("the same seed gave another order")
	}

	// Two ranks of a job get every row once between them, each in exactly
	// the order the library delivers to that rank.
	job := []string{"--shuffle", "--seed", "9", "--world-size", "2", "--num-splits", "4", "--batch-size", "64"}
	r0 := catIDs(t, append([]string{dataDir, "--rank", "0"}, job...)...)
	r1 := catIDs(t, append([]string{dataDir, "--rank", "1"}, job...)...)
	if both := slices.Sorted(slices.Values(append(slices.Clone(r0), r1...))); !isIota(both, spec.Rows()) {
		t.Errorf("ranks 0 and 1 together: %d rows, not every row once", len(both))
	}
	want := streamIDs(t, stream.Options{URLs: []string{dataDir}, Columns: []string{"id"}, Shuffle: true, Seed: 9, WorldSize: 2, Rank: 1, NumSplits: 4, BatchSize: 64}, 0, nil)
	if !slices.Equal(r1, want) {
		t.Errorf("rank 1 printed another order than the library delivers")
	}

	if out := ok(t, "cat", dataDir, "--limit", "0"); out != "" {
		t.Errorf("--limit 0 printed %q", out)
	}
	if got := catIDs(t, "--limit", "2", "--", dataDir); !slices.Equal(got, []int64{0, 1}) {
		t.Errorf("cat --limit 2 -- DIR: %v", got)
	}
}

// objectKeys returns the keys of a JSON object in the order written.
func objectKeys(t *testing.T, line string) []string {
	t.Helper()
	var raw map[string]json.RawMessage
	if err := json.Unmarshal([]byte(line), &raw); err != nil {
		t.Fatalf("%q: %v", line, err)
	}
	dec := json.NewDecoder(strings.NewReader(line))
	dec.Token() // {
	var keys []string
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			t.Fatal(err)
		}
	}
	return keys
}

func isIota(ids []int64, n int64) bool {
	if int64(len(ids)) != n {
		return false
	}
	for i, id := range ids {
		if id != int64(i) {
			return false
		}
	}
	return true
}

// streamIDs opens a dataset, skips its first `skip` batches (calling
// atBatch after each, if set, with the batch count) and returns the ids of
// the rest of the epoch.
func streamIDs(t *testing.T, opts stream.Options, skip int, atBatch func(ds *stream.Dataset, n int)) []int64 {
	t.Helper()
	ctx := context.Background()
	ds, err := stream.Open(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	var ids []int64
	n := 0
	for b, err := range ds.Batches(ctx) {
		if err != nil {
			t.Fatal(err)
		}
		n++
		if n <= skip {
			if atBatch != nil {
				atBatch(ds, n)
			}
			continue
		}
		ids = append(ids, b.Column(0).(*array.Int64).Int64Values()...)
	}
	return ids
}

// fillStore saves real states of a two-rank job: steps 10 and 20 complete
// (after 2 and 4 batches of each rank), step 30 with rank 0's state alone
// (after 5). It returns the ids rank 0 receives after step 20.
func fillStore(t *testing.T, store checkpoint.Store, opts stream.Options) (afterStep20 []int64) {
	t.Helper()
	for rank := range 2 {
		o := opts
		o.Rank = rank
		streamIDs(t, o, 5, func(ds *stream.Dataset, n int) {
			var step int64
			switch {
			case n == 2:
				step = 10
			case n == 4:
				step = 20
			case n == 5 && rank == 0:
				step = 30
			default:
				return
			}
			if err := store.Save(context.Background(), "exp", step, rank, ds.StateDict()); err != nil {
				t.Fatal(err)
			}
		})
	}
	o := opts
	o.Rank = 0
	return streamIDs(t, o, 4, nil)
}

func TestCheckpoint(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ckpt")
	store, err := pebblestore.Open(dir, pebblestore.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	opts := stream.Options{URLs: []string{dataDir}, Columns: []string{"id"}, Shuffle: true, Seed: 3, NumSplits: 4, WorldSize: 2, BatchSize: 100}
	rank0After20 := fillStore(t, store, opts)
	// While a job holds the store, sluice says so rather than waiting.
	fails(t, exitFailure, []string{"in use"}, "checkpoint", "ls", "--run", "exp", dir)
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}

	out := ok(t, "checkpoint", "ls", "--run", "exp", dir)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 4 {
		t.Fatalf("ls: want a header and 3 steps:\n%s", out)
	}
	for i, want := range []string{"10  complete", "20  complete", "30  incomplete"} {
		if !strings.Contains(lines[i+1], want) {
			t.Errorf("ls line %d %q lacks %q", i+1, lines[i+1], want)
		}
	}
	if !strings.Contains(lines[1], " 400") || !strings.Contains(lines[3], "missing") {
		t.Errorf("ls: rows taken or the reason missing:\n%s", out)
	}
	var steps []stepView
	if err := json.Unmarshal([]byte(ok(t, "checkpoint", "ls", "--json", "--run", "exp", dir)), &steps); err != nil || len(steps) != 3 {
		t.Fatalf("ls --json: %v, %d steps", err, len(steps))
	}
	if *steps[1].RowsTaken != 800 || steps[2].Complete || steps[2].RowsTaken != nil {
		t.Errorf("ls --json: %+v", steps)
	}

	// show: the newest complete step, with the fingerprint inspect computes
	// for the same options.
	var v showView
	if err := json.Unmarshal([]byte(ok(t, "checkpoint", "show", dir, "--run", "exp", "--json")), &v); err != nil {
		t.Fatal(err)
	}
	rep := inspectJSON(t, dataDir, "--columns", "id", "--shuffle", "--seed", "3", "--num-splits", "4", "--world-size", "2")
	if v.Step != 20 || !v.Latest || !v.Complete || v.WorldSize != 2 || len(v.Cursors) != 4 || v.Fingerprint != rep.Fingerprint || v.Plan != rep.Plan {
		t.Errorf("show: %+v\ninspect fingerprint %s plan %s", v, rep.Fingerprint, rep.Plan)
	}
	var rows int64
	for _, c := range v.Cursors {
		if !c.Known || c.Rank != c.Split%2 {
			t.Errorf("cursor %+v", c)
		}
		rows += c.Rows
	}
	if rows != 800 || *v.RowsTaken != 800 || len(v.RankStates) != 2 {
		t.Errorf("show: cursors hold %d rows, rows taken %d, %d ranks", rows, *v.RowsTaken, len(v.RankStates))
	}
	text := ok(t, "checkpoint", "show", "--run", "exp", "--step", "30", dir)
	for _, w := range []string{"step:            30", "incomplete", "SPLIT", "WINDOW"} {
		if !strings.Contains(text, w) {
			t.Errorf("show --step 30 lacks %q:\n%s", w, text)
		}
	}
	fails(t, exitNotFound, []string{"step 99", "10, 20, 30"}, "checkpoint", "show", "--run", "exp", "--step", "99", dir)
	fails(t, exitNotFound, []string{`"nope"`}, "checkpoint", "ls", "--run", "nope", dir)
	fails(t, exitNotFound, []string{"does not exist"}, "checkpoint", "ls", "--run", "exp", filepath.Join(dir, "missing"))
	fails(t, exitNotFound, []string{"no checkpoint store"}, "checkpoint", "ls", "--run", "exp", dataDir)
	if fileExists(filepath.Join(dataDir, "LOCK")) {
		t.Errorf("checkpoint ls left a LOCK file in a data directory")
	}

	// cat resumes where rank 0 stood at step 20, taking the order options
	// from the state.
	if got := catIDs(t, dataDir, "--checkpoint", dir, "--run", "exp", "--rank", "0", "--batch-size", "100"); !slices.Equal(got, rank0After20) {
		t.Errorf("cat --checkpoint: %d rows, want the %d rank 0 receives after step 20", len(got), len(rank0After20))
	}
	fails(t, exitFailure, []string{"field seed"}, "cat", dataDir, "--checkpoint", dir, "--run", "exp", "--seed", "4")

	out = ok(t, "checkpoint", "rm", "--run", "exp", "--keep", "1", dir)
	if !strings.Contains(out, "deleted step 10") {
		t.Errorf("rm --keep 1: %s", out)
	}
	ok(t, "checkpoint", "rm", "--run", "exp", "--step", "30", dir)
	fails(t, exitNotFound, []string{"step 30"}, "checkpoint", "rm", "--run", "exp", "--step", "30", dir)
	if err := json.Unmarshal([]byte(ok(t, "checkpoint", "ls", "--json", "--run", "exp", dir)), &steps); err != nil || len(steps) != 1 || steps[0].Step != 20 {
		t.Errorf("after rm: %+v, %v", steps, err)
	}
}

func TestCheckpointBucket(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	url := "file://" + dir
	store, err := checkpoint.OpenBucketStoreURL(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	opts := stream.Options{URLs: []string{dataDir}, Columns: []string{"id"}, NumSplits: 2, WorldSize: 2, BatchSize: 100}
	fillStore(t, store, opts)
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}
	out := ok(t, "checkpoint", "ls", "--run", "exp", url)
	if strings.Count(out, "\n") != 4 || !strings.Contains(out, "no completion marker") && !strings.Contains(out, "missing") {
		t.Errorf("ls of a bucket store:\n%s", out)
	}
	if out := ok(t, "checkpoint", "show", "--run", "exp", url); !strings.Contains(out, "step:            20") {
		t.Errorf("show of a bucket store:\n%s", out)
	}
	fails(t, exitNotFound, nil, "checkpoint", "ls", "--run", "exp", "mem://")
	fails(t, exitNotFound, nil, "checkpoint", "ls", "--run", "exp", "file://"+filepath.Join(dir, "missing"))
}

func TestBench(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("the stand-in harness is a shell script")
	}
	script := filepath.Join(t.TempDir(), "fake-bench")
	body := "#!/bin/sh\necho \"args:$*\"\necho \"to stderr\" >&2\nexit 7\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	r := runEnv(t, []string{"SLUICE_BENCH=" + script}, "bench", "-quick", "-out", "x y")
	if r.code != 7 || r.stdout != "args:-quick -out x y\n" || r.stderr != "to stderr\n" {
		t.Errorf("bench: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	r = runEnv(t, []string{"SLUICE_BENCH=" + script}, "bench", "--", "-help")
	if r.code != 7 || r.stdout != "args:-help\n" {
		t.Errorf("bench -- -help: exit %d, stdout %q", r.code, r.stdout)
	}
	r = runEnv(t, []string{"SLUICE_BENCH=" + filepath.Join(t.TempDir(), "none")}, "bench")
	if r.code != exitFailure {
		t.Errorf("bench with a missing harness: exit %d", r.code)
	}
	checkOneLine(t, r.stderr, "harness")
}

// Unit tests of the pieces that need no process.

func TestParseInterleaved(t *testing.T) {
	for _, tc := range []struct {
		args []string
		pos  []string
		n    int64
	}{
		{[]string{"a", "--limit", "5", "b"}, []string{"a", "b"}, 5},
		{[]string{"--limit=3", "a"}, []string{"a"}, 3},
		{[]string{"a", "--", "--limit", "b"}, []string{"a", "--limit", "b"}, -1},
		{[]string{"-limit", "2", "--", "-x"}, []string{"-x"}, 2},
	} {
		fs, cfg := catFlags()
		pos, err := parse(fs, tc.args)
		if err != nil || !slices.Equal(pos, tc.pos) || cfg.limit != tc.n {
			t.Errorf("parse %q: %q, limit %d, %v; want %q, %d", tc.args, pos, cfg.limit, err, tc.pos, tc.n)
		}
	}
}

func TestOneLine(t *testing.T) {
	got := oneLine("formats: f.parquet: decoder panicked: boom\ngoroutine 1 [running]:\n\tmain.go:12\n")
	if strings.ContainsAny(got, "\n\r") || !strings.HasPrefix(got, "formats: f.parquet: decoder panicked: boom | goroutine 1") {
		t.Errorf("oneLine: %q", got)
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"0": 0, "512": 512, "4K": 4096, "1MiB": 1 << 20, "2 GB": 2 << 30, "3m": 3 << 20} {
		if got, err := parseSize(in); err != nil || got != want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "x", "-1", "1.5M", "99999999999G"} {
		if _, err := parseSize(in); err == nil {
			t.Errorf("parseSize(%q) accepted", in)
		}
	}
}

func TestExitCodes(t *testing.T) {
	e := &env{stdout: io.Discard, stderr: io.Discard}
	for err, want := range map[error]int{
		usageErrorf("x"): exitUsage,
		notFoundf("x"):   exitNotFound,
		fmt.Errorf("a: %w", checkpoint.ErrNotFound):    exitNotFound,
		fmt.Errorf("a: %w", checkpoint.ErrMismatch):    exitFailure,
		fmt.Errorf("a: %w", formats.ErrChanged):        exitFailure,
		fmt.Errorf("a: %w", errInterrupted):            exitInterrupted,
		errors.New("plain"):                            exitFailure,
		fmt.Errorf("wrapped: %w", &exitError{code: 9}): 9,
	} {
		if got := report(e, "x", err); got != want {
			t.Errorf("%v: exit %d, want %d", err, got, want)
		}
	}
	if strconv.Itoa(exitInterrupted) != "130" {
		t.Fatal("the documented interrupt status is 130")
	}
}

func TestRowJSON(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	point := arrow.StructOf(arrow.Field{Name: "z", Type: arrow.PrimitiveTypes.Int32}, arrow.Field{Name: "a", Type: arrow.BinaryTypes.String, Nullable: true})
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "f", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		{Name: "s", Type: arrow.BinaryTypes.String},
		{Name: "p", Type: point},
		{Name: "l", Type: arrow.ListOf(arrow.PrimitiveTypes.Float32)},
		{Name: "b", Type: arrow.BinaryTypes.Binary},
	}, nil)
	b := array.NewRecordBuilder(mem, schema)
	defer b.Release()
	b.Field(0).(*array.Float64Builder).AppendValues([]float64{math.NaN(), math.Inf(1), math.Inf(-1), 0.5}, nil)
	b.Field(0).(*array.Float64Builder).AppendNull()
	for _, s := range []string{"a\"b\\c\n", "<&>", "\x01", "\xff", "\u2028"} {
		b.Field(1).(*array.StringBuilder).Append(s)
	}
	pb := b.Field(2).(*array.StructBuilder)
	lb := b.Field(3).(*array.ListBuilder)
	for i := range 5 {
		pb.Append(true)
		pb.FieldBuilder(0).(*array.Int32Builder).Append(int32(i))
		if i%2 == 0 {
			pb.FieldBuilder(1).(*array.StringBuilder).AppendNull()
		} else {
			pb.FieldBuilder(1).(*array.StringBuilder).Append("x")
		}
		lb.Append(true)
		lb.ValueBuilder().(*array.Float32Builder).AppendValues([]float32{float32(i), 1.5}, nil)
		b.Field(4).(*array.BinaryBuilder).Append([]byte{byte(i)})
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	enc := newRowEncoder(schema)
	var got []string
	for i := range int(rec.NumRows()) {
		line, err := enc.appendRow(nil, rec, i)
		if err != nil {
			t.Fatal(err)
		}
		if !json.Valid(line) {
			t.Errorf("row %d is not JSON: %s", i, line)
		}
		got = append(got, string(line))
	}
	want := []string{
		`{"f":"NaN","s":"a\"b\\c\n","p":{"z":0,"a":null},"l":[0,1.5],"b":"AA=="}` + "\n",
		`{"f":"+Inf","s":"<&>","p":{"z":1,"a":"x"},"l":[1,1.5],"b":"AQ=="}` + "\n",
		`{"f":"-Inf","s":"\u0001","p":{"z":2,"a":null},"l":[2,1.5],"b":"Ag=="}` + "\n",
		`{"f":0.5,"s":"\ufffd","p":{"z":3,"a":"x"},"l":[3,1.5],"b":"Aw=="}` + "\n",
		`{"f":null,"s":"\u2028","p":{"z":4,"a":null},"l":[4,1.5],"b":"BA=="}` + "\n",
	}
	if !slices.Equal(got, want) {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, ""), strings.Join(want, ""))
	}
}

// TestCatNested prints files written by other tools with nested and
// floating-point columns, compared with what those files hold.
func TestCatNested(t *testing.T) {
	data := filepath.Join(corpus.Dir(t), "parquet-testing", "data")
	for file, want := range map[string]string{
		"nested_lists.snappy.parquet": `{"a":[[["a","b"],["c"]],[null,["d"]]],"b":1}`,
		"nested_maps.snappy.parquet":  `{"a":[{"key":"a","value":[{"key":1,"value":true},{"key":2,"value":false}]}],"b":1,"c":1}`,
		"nan_in_stats.parquet":        `{"x":1}` + "\n" + `{"x":"NaN"}`,
	} {
		p := filepath.Join(data, file)
		if !fileExists(p) {
			t.Fatalf("%s not found", p)
		}
		n := strconv.Itoa(strings.Count(want, "\n") + 1)
		if got := strings.TrimSuffix(ok(t, "cat", p, "--limit", n), "\n"); got != want {
			t.Errorf("cat %s:\n%s\nwant\n%s", file, got, want)
		}
	}
}

// A bucket URL the driver refuses is reported once, without its query (a
// secret may travel there) and without saying the same thing twice.
func TestOpenBucketErrors(t *testing.T) {
	for _, args := range [][]string{
		{"inspect", "s3://bucket/x.parquet?nosuchparam=hunter2"},
		{"checkpoint", "ls", "--run", "r", "s3://bucket/ckpt?nosuchparam=hunter2"},
	} {
		r := run(t, args...)
		if r.code == exitOK {
			t.Fatalf("sluice %s succeeded", strings.Join(args, " "))
		}
		line := strings.TrimSpace(r.stderr)
		if !strings.Contains(line, "nosuchparam") || strings.Contains(line, "hunter2") {
			t.Errorf("sluice %s: %q should name the parameter and not show its value", args[0], line)
		}
		if n := strings.Count(line, "open bucket"); n != 1 || strings.Contains(line, "checkpoint: checkpoint:") {
			t.Errorf("sluice %s: %q repeats itself", args[0], line)
		}
	}
}

// Split boundaries that cut row groups are reported: fetched again where
// the file has no page index, read by pages where it has one.
func TestInspectOverlap(t *testing.T) {
	dir := t.TempDir()
	for _, paged := range []bool{false, true} {
		sub := filepath.Join(dir, fmt.Sprint(paged))
		if err := synth.WriteDir(sub, synth.Spec{Files: 1, RowsPerFile: 4000, RowGroupRows: 4000, PageIndex: paged}); err != nil {
			t.Fatal(err)
		}
		rep := inspectJSON(t, sub, "--num-splits", "8")
		out := ok(t, "inspect", sub, "--num-splits", "8")
		switch {
		case rep.Overlap.CutRowGroups != 1:
			t.Errorf("page index %t: %d cut row groups, want the one", paged, rep.Overlap.CutRowGroups)
		case paged && (rep.Overlap.PagedRowGroups != 1 || rep.Overlap.RefetchBytes != 0 || strings.Contains(out, "fetched again")):
			t.Errorf("page index: overlap %+v, output:\n%s", rep.Overlap, out)
		case !paged && (rep.Overlap.PagedRowGroups != 0 || rep.Overlap.RefetchBytes != 7*rep.Totals.SelectedBytes || !strings.Contains(out, "fetched again")):
			t.Errorf("no page index: overlap %+v (7 extra fetches of %d bytes), output:\n%s", rep.Overlap, rep.Totals.SelectedBytes, out)
		}
	}
}
