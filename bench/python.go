package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
)

// The Python lines: rows/s reaching Python through the sluice package
// (python/, over the C ABI of capi/), against the Go API's rows/s on the
// same data with the same options, measured in the same run just before.
// python_numpy and python_torch stream sequential and shuffled passes of
// the numeric columns and of all columns; the line's own rows_per_s and
// ratio_vs_go are the sequential numeric pass's, and a batch hand-off must
// cost microseconds, not a copy: ratio_vs_go >= 0.9 for numeric columns.
// Strings as Python objects are copies by nature; their figures are
// reported as measured. python_strings streams all columns with the
// strings in their zero-copy form (offsets and bytes): >= 0.8 of Go. python_dataloader_workers streams through
// sluice.torch.DataLoader with 0, 2 and 4 workers (spawned, persistent; the
// second epoch is timed) beside the DataLoader's own floor in the same run:
// a plain IterableDataset whose 2 workers yield new tensors of the same
// shapes from memory (ipc_floor_rows_per_s). A worker must cost little
// more than the hand-off to the main process does: workers_2_ratio_vs_floor
// >= 0.8. first_batch_seconds_spawn is what a user waits for the first
// batch of 2 spawned workers, beside the floor's (whose workers import
// torch too): at most 1.5 times it.
var pythonLines = []string{"python_numpy", "python_torch", "python_strings", "python_dataloader_workers"}

// pythonPasses are the passes of python_numpy and python_torch.
var pythonPasses = []struct {
	suffix  string
	columns []string
	shuffle bool
}{
	{"sequential_numeric", []string{"id", "label", "x"}, false},
	{"shuffled_numeric", []string{"id", "label", "x"}, true},
	{"sequential_all", []string{"id", "label", "x", "s"}, false},
	{"shuffled_all", []string{"id", "label", "x", "s"}, true},
}

// pythonEpochs is the epochs one measured pass of python_numpy,
// python_torch and python_strings streams, in Go and in Python alike,
// from one open: a 2M-row epoch lasts 30-50 ms on 2 cores, where the
// machine's drift and a pass's start (opening the dataset, a first call
// into the library, waking its threads) moved the ratio by tens of
// percent between runs; a training job streams epochs of millions of rows
// from one open.
const pythonEpochs = 4

// pythonSetup is what a skipped line tells the user to run.
const pythonSetup = "bash scripts/python.sh"

func (e *env) pythonScenario(ctx context.Context) error {
	skip := func(reason string) error {
		for _, l := range pythonLines {
			if err := e.emit(newRecord("scenario").set("scenario", l).set("skipped", "run "+pythonSetup).set("skip_reason", reason)); err != nil {
				return err
			}
		}
		return nil
	}
	root := repoRoot()
	if root == "" {
		return skip("the repository (capi/, python/) is not found from the working directory")
	}
	py, hasTorch, ok := findPython(ctx)
	if !ok {
		return skip(py + " cannot import numpy")
	}
	tmp, err := os.MkdirTemp("", "sluice-bench-python")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	lib := filepath.Join(tmp, "libsluice.so")
	if reason := buildCABI(ctx, root, lib); reason != "" {
		return skip(reason)
	}
	b, reason, err := e.startPyBench(ctx, root, py, lib)
	if err != nil {
		return err
	}
	if reason != "" {
		return skip(reason)
	}
	defer b.close()
	res, err := e.pythonPasses(ctx, b, hasTorch)
	if err != nil {
		return err
	}
	return e.emitPython(res, py, hasTorch)
}

// findPython is the interpreter the Python lines run (SLUICE_PYTHON, else
// the system's), whether it imports torch, and whether it imports numpy,
// without which nothing runs.
func findPython(ctx context.Context) (py string, hasTorch, hasNumpy bool) {
	py = os.Getenv("SLUICE_PYTHON")
	if py == "" {
		py = "/usr/bin/python3"
		if _, err := os.Stat(py); err != nil {
			py = "python3"
		}
	}
	hasTorch = exec.CommandContext(ctx, py, "-c", "import numpy, torch").Run() == nil
	hasNumpy = exec.CommandContext(ctx, py, "-c", "import numpy").Run() == nil
	return py, hasTorch, hasNumpy
}

// buildCABI builds the C ABI (capi/) as the shared library lib, and says
// why the lines are skipped where it cannot.
func buildCABI(ctx context.Context, root, lib string) (skipReason string) {
	build := exec.CommandContext(ctx, "go", "build", "-buildmode=c-shared", "-ldflags=-s -w", "-o", lib, "./capi")
	build.Dir = root
	build.Env = append(os.Environ(), "CGO_ENABLED=1")
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Sprintf("building the C ABI (needs cgo and a C compiler): %v: %s", err, bytes.TrimSpace(out))
	}
	return ""
}

// pyRequest asks bench/python_bench.py to run one pass.
type pyRequest struct {
	Name    string   `json:"name"`
	Mode    string   `json:"mode"`
	Columns []string `json:"columns"`
	Shuffle bool     `json:"shuffle"`
	Workers int      `json:"workers"`
	// Epochs is how many epochs a pass without a DataLoader streams from
	// one open (pythonEpochs).
	Epochs int `json:"epochs,omitempty"`
	// FirstBatch times a first epoch on spawned workers from iter() to its
	// first batch (pyRun.FirstBatchS).
	FirstBatch bool `json:"first_batch,omitempty"`
}

// pyBench is bench/python_bench.py running over the dataset: it takes a
// pass a line on its stdin and answers a line.
type pyBench struct {
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	answers *bufio.Scanner
	stderr  *bytes.Buffer
	rows    int64 // the dataset's
}

// startPyBench starts bench/python_bench.py with py over lib, or says why
// the lines are skipped where py does not start.
func (e *env) startPyBench(ctx context.Context, root, py, lib string) (_ *pyBench, skipReason string, _ error) {
	cmd := exec.CommandContext(ctx, py, filepath.Join(root, "bench", "python_bench.py"), e.data.dir, fmt.Sprint(e.cfg.BatchSize), fmt.Sprint(e.data.spec.Rows()))
	cmd.Env = append(os.Environ(), "SLUICE_LIBRARY="+lib, "PYTHONPATH="+filepath.Join(root, "python"))
	b := &pyBench{cmd: cmd, stderr: &bytes.Buffer{}, rows: e.data.spec.Rows()}
	cmd.Stderr = b.stderr
	var err error
	if b.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, "", err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, "", err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Sprintf("%s: %v", py, err), nil
	}
	b.answers = bufio.NewScanner(stdout)
	return b, "", nil
}

func (b *pyBench) close() {
	b.stdin.Close()
	b.cmd.Wait()
}

// measure runs r once in the Python process.
func (b *pyBench) measure(r pyRequest) (pyRun, error) {
	line, _ := json.Marshal(r)
	if _, err := b.stdin.Write(append(line, '\n')); err != nil {
		return pyRun{}, fmt.Errorf("python bench: %w: %s", err, lastLines(b.stderr.String(), 10))
	}
	if !b.answers.Scan() {
		return pyRun{}, fmt.Errorf("python bench %s: no answer: %s", r.Name, lastLines(b.stderr.String(), 10))
	}
	var x pyRun
	if err := json.Unmarshal(b.answers.Bytes(), &x); err != nil {
		return pyRun{}, fmt.Errorf("python bench output %q: %w", b.answers.Text(), err)
	}
	if want := b.rows * int64(max(r.Epochs, 1)); x.Rows != want {
		return pyRun{}, fmt.Errorf("python bench %s delivered %d rows, %d epochs of the dataset have %d", r.Name, x.Rows, max(r.Epochs, 1), want)
	}
	return x, nil
}

// pyResults are the fastest rows/s of each Go pass (by pass suffix) and of
// each Python pass (by name: mode/suffix, dataloader/workers), with the
// bytes each Go pass stored.
type pyResults struct {
	goRate map[string]float64
	stored map[string]int64
	best   map[string]pyRun
	// goCPU and cpu are the least CPU seconds of a pass (Go's by pass
	// suffix, Python's by name): on a loaded machine they say what a pass
	// costs where rows/s says mostly how the machine was shared.
	goCPU, cpu map[string]float64
}

func (r *pyResults) keep(name string, x pyRun) {
	if x.RowsPerS > r.best[name].RowsPerS {
		r.best[name] = x
	}
	keepLeast(r.cpu, name, x.CPUS)
}

// keepLeast keeps the least positive v of name in m.
func keepLeast(m map[string]float64, name string, v float64) {
	if old, ok := m[name]; v > 0 && (!ok || v < old) {
		m[name] = v
	}
}

// pythonPasses runs the Go and Python passes. Each Python pass runs right
// after a Go pass of the same options, the fastest of each kept: the
// machine's speed drifts within a minute.
func (e *env) pythonPasses(ctx context.Context, b *pyBench, hasTorch bool) (*pyResults, error) {
	res := &pyResults{goRate: map[string]float64{}, stored: map[string]int64{}, best: map[string]pyRun{},
		goCPU: map[string]float64{}, cpu: map[string]float64{}}
	for _, p := range pythonPasses {
		o := e.opts()
		o.Columns, o.Shuffle, o.Seed = p.columns, p.shuffle, 42
		for range max(e.cfg.Reps, 1) {
			runtime.GC()
			m, err := measureStream(ctx, streamRun{urls: []string{e.data.dir}, opts: o, epochs: pythonEpochs})
			if err == nil {
				err = expectRows(m, pythonEpochs*e.data.spec.Rows())
			}
			if err != nil {
				return nil, fmt.Errorf("go %s: %w", p.suffix, err)
			}
			res.goRate[p.suffix] = max(res.goRate[p.suffix], m.rowsPerSec())
			keepLeast(res.goCPU, p.suffix, m.cpuSeconds)
			res.stored[p.suffix] = m.storedBytes
			for _, mode := range []string{"numpy", "torch", "strings"} {
				if mode == "torch" && !hasTorch || mode == "strings" && !slices.Contains(p.columns, "s") {
					continue
				}
				x, err := b.measure(pyRequest{Name: mode + "/" + p.suffix, Mode: mode, Columns: p.columns, Shuffle: p.shuffle, Epochs: pythonEpochs})
				if err != nil {
					return nil, err
				}
				res.keep(mode+"/"+p.suffix, x)
			}
		}
	}
	if hasTorch {
		numeric := pythonPasses[1].columns
		for _, k := range []int{0, 2, 4} {
			name := fmt.Sprintf("dataloader/%d", k)
			for range max(e.cfg.Reps, 1) {
				x, err := b.measure(pyRequest{Name: name, Mode: "dataloader", Columns: numeric, Shuffle: true, Workers: k})
				if err != nil {
					return nil, err
				}
				res.keep(name, x)
				if k != 2 {
					continue
				}
				// The floor right after the line it is the floor of.
				if x, err = b.measure(pyRequest{Name: "floor/2", Mode: "floor", Columns: numeric, Workers: 2}); err != nil {
					return nil, err
				}
				res.keep("floor/2", x)
			}
		}
		// Spawning workers takes seconds: one first batch of each, the
		// floor's right after sluice's.
		for _, mode := range []string{"dataloader", "floor"} {
			x, err := b.measure(pyRequest{Name: mode + "/first", Mode: mode, Columns: numeric, Shuffle: true, Workers: 2, FirstBatch: true})
			if err != nil {
				return nil, err
			}
			res.best[mode+"/first"] = x
		}
	}
	return res, nil
}

// emitPython emits the Python lines from the passes' results.
func (e *env) emitPython(res *pyResults, py string, hasTorch bool) error {
	// line fills the fields every throughput line has from a Python pass.
	line := func(name string, x pyRun, storedBytes int64) *record {
		r := newRecord("scenario").set("scenario", name)
		r.set("rows", x.Rows)
		r.set("seconds", float64(x.Rows)/x.RowsPerS)
		r.set("rows_per_s", x.RowsPerS)
		r.set("baseline_rows_per_s", e.floor)
		r.set("ratio_vs_baseline", x.RowsPerS/e.floor)
		r.set("io_amplification", float64(x.ReadBytes)/float64(storedBytes))
		return r
	}
	goRate, stored, pyBest := res.goRate, res.stored, res.best
	for _, mode := range []string{"numpy", "torch"} {
		name := "python_" + mode
		first := pythonPasses[0].suffix
		x, ok := pyBest[mode+"/"+first]
		if !ok {
			if err := e.emit(newRecord("scenario").set("scenario", name).set("skipped", "run "+pythonSetup).set("skip_reason", py+" cannot import torch")); err != nil {
				return err
			}
			continue
		}
		r := line(name, x, stored[first])
		r.set("go_rows_per_s", goRate[first])
		r.set("ratio_vs_go", x.RowsPerS/goRate[first])
		res.setCPU(r, "", mode+"/"+first, first)
		for _, p := range pythonPasses[1:] {
			r.set(p.suffix+"_rows_per_s", pyBest[mode+"/"+p.suffix].RowsPerS)
			r.set(p.suffix+"_ratio_vs_go", pyBest[mode+"/"+p.suffix].RowsPerS/goRate[p.suffix])
			res.setCPU(r, p.suffix+"_", mode+"/"+p.suffix, p.suffix)
		}
		r.set("epochs_per_pass", pythonEpochs)
		r.set("options", fmt.Sprintf("BatchSize %d; numeric: id, label, x; all: and s (strings); shuffled: Seed 42; rows_per_s, ratio_vs_go: sequential numeric; a pass: %d epochs from one open, Go and Python alike", e.cfg.BatchSize, pythonEpochs))
		r.target("ratio_vs_go", ">=", 0.9).target("shuffled_numeric_ratio_vs_go", ">=", 0.9)
		if err := e.emit(r); err != nil {
			return err
		}
	}
	if err := e.emitStrings(res, line); err != nil {
		return err
	}
	if !hasTorch {
		return e.emit(newRecord("scenario").set("scenario", "python_dataloader_workers").set("skipped", "run "+pythonSetup).set("skip_reason", py+" cannot import torch"))
	}
	r := line("python_dataloader_workers", pyBest["dataloader/0"], stored[pythonPasses[1].suffix])
	for _, k := range []int{2, 4} {
		r.set(fmt.Sprintf("workers_%d_rows_per_s", k), pyBest[fmt.Sprintf("dataloader/%d", k)].RowsPerS)
	}
	r.set("go_rows_per_s", goRate[pythonPasses[1].suffix])
	floor := pyBest["floor/2"].RowsPerS
	r.set("ipc_floor_rows_per_s", floor)
	r.set("workers_2_ratio_vs_floor", pyBest["dataloader/2"].RowsPerS/floor)
	first, floorFirst := pyBest["dataloader/first"].FirstBatchS, pyBest["floor/first"].FirstBatchS
	r.set("first_batch_seconds_spawn", first)
	r.set("floor_first_batch_seconds_spawn", floorFirst)
	r.set("first_batch_ratio_vs_floor", first/floorFirst)
	r.set("options", "shuffled numeric columns through sluice.torch.DataLoader, NumSplits 4; rows_per_s: 0 workers; "+
		"workers spawned, persistent, second epoch timed; ipc floor: torch's DataLoader over a plain IterableDataset, "+
		"2 workers yielding new tensors of the batches' shapes; first batch: 2 spawned workers, iter() to the first batch")
	r.target("workers_2_ratio_vs_floor", ">=", 0.8).target("first_batch_ratio_vs_floor", "<=", 1.5)
	return e.emit(r)
}

// emitStrings emits python_strings: all columns, the string column in its
// zero-copy form (strings="arrays": offsets and bytes as NumPy arrays), as
// NumPy arrays, against the Go API on the same columns.
func (e *env) emitStrings(res *pyResults, line func(string, pyRun, int64) *record) error {
	seq, shuf := pythonPasses[2].suffix, pythonPasses[3].suffix
	r := line("python_strings", res.best["strings/"+seq], res.stored[seq])
	r.set("go_rows_per_s", res.goRate[seq])
	r.set("ratio_vs_go", res.best["strings/"+seq].RowsPerS/res.goRate[seq])
	res.setCPU(r, "", "strings/"+seq, seq)
	r.set("shuffled_rows_per_s", res.best["strings/"+shuf].RowsPerS)
	r.set("shuffled_ratio_vs_go", res.best["strings/"+shuf].RowsPerS/res.goRate[shuf])
	res.setCPU(r, "shuffled_", "strings/"+shuf, shuf)
	r.set("epochs_per_pass", pythonEpochs)
	r.set("options", fmt.Sprintf("BatchSize %d; id, label, x, s with strings=\"arrays\" (s as offsets and bytes, no copy); rows_per_s, ratio_vs_go: sequential; shuffled: Seed 42; a pass: %d epochs from one open, Go and Python alike", e.cfg.BatchSize, pythonEpochs))
	r.target("ratio_vs_go", ">=", 0.8)
	return e.emit(r)
}

// setCPU sets on r, its names prefixed, the least CPU seconds of the
// Python pass name and of the Go pass suffix, and Go's as a fraction of
// Python's (1: the hand-off costs no CPU).
func (res *pyResults) setCPU(r *record, prefix, name, suffix string) {
	py, gocpu := res.cpu[name], res.goCPU[suffix]
	if py == 0 || gocpu == 0 {
		return
	}
	r.set(prefix+"cpu_seconds", py)
	r.set(prefix+"go_cpu_seconds", gocpu)
	r.set(prefix+"cpu_ratio_vs_go", gocpu/py)
}

// pyRun is one pass's answer from bench/python_bench.py.
type pyRun struct {
	Rows      int64   `json:"rows"`
	RowsPerS  float64 `json:"rows_per_s"`
	ReadBytes int64   `json:"read_bytes"`
	// FirstBatchS is the seconds from iter() to the first batch, of a
	// request with FirstBatch.
	FirstBatchS float64 `json:"first_batch_s"`
	// CPUS is the CPU seconds of a pass without a DataLoader (0 for
	// those), the whole process's: Go's threads and Python's.
	CPUS float64 `json:"cpu_s"`
}

// repoRoot is the module's root: the working directory's or the one this
// source file is in (go run keeps its path), whichever holds capi/.
func repoRoot() string {
	cands := []string{"."}
	if _, src, _, ok := runtime.Caller(0); ok {
		cands = append(cands, filepath.Dir(filepath.Dir(src)))
	}
	for _, c := range cands {
		if _, err := os.Stat(filepath.Join(c, "capi", "main.go")); err == nil {
			if abs, err := filepath.Abs(c); err == nil {
				return abs
			}
		}
	}
	return ""
}
