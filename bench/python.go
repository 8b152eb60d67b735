package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
)

// The Python lines: rows/s reaching Python through the sluice package
// (python/, over the C ABI of capi/), against the Go API's rows/s on the
// same data with the same options, measured in the same run just before.
// python_numpy and python_torch stream sequential and shuffled passes of
// the numeric columns and of all columns; the line's own rows_per_s and
// ratio_vs_go are the sequential numeric pass's, and a batch hand-off must
// cost microseconds, not a copy: ratio_vs_go >= 0.8 for numeric columns.
// Strings are copied into Python objects by nature; their figures are
// reported as measured. python_dataloader_workers streams through
// torch's DataLoader with 0, 2 and 4 workers (spawned, persistent; the
// second epoch is timed).
var pythonLines = []string{"python_numpy", "python_torch", "python_dataloader_workers"}

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
	py := os.Getenv("SLUICE_PYTHON")
	if py == "" {
		py = "/usr/bin/python3"
		if _, err := os.Stat(py); err != nil {
			py = "python3"
		}
	}
	hasTorch := exec.CommandContext(ctx, py, "-c", "import numpy, torch").Run() == nil
	if err := exec.CommandContext(ctx, py, "-c", "import numpy").Run(); err != nil {
		return skip(py + " cannot import numpy")
	}
	tmp, err := os.MkdirTemp("", "sluice-bench-python")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	lib := filepath.Join(tmp, "libsluice.so")
	build := exec.CommandContext(ctx, "go", "build", "-buildmode=c-shared", "-ldflags=-s -w", "-o", lib, "./capi")
	build.Dir = root
	build.Env = append(os.Environ(), "CGO_ENABLED=1")
	if out, err := build.CombinedOutput(); err != nil {
		return skip(fmt.Sprintf("building the C ABI (needs cgo and a C compiler): %v: %s", err, bytes.TrimSpace(out)))
	}

	goRate := map[string]float64{}
	for _, p := range pythonPasses {
		o := e.opts()
		o.Columns, o.Shuffle, o.Seed = p.columns, p.shuffle, 42
		m, _, err := bestOf(e.cfg.Reps, func() (measurement, error) {
			m, err := measureStream(ctx, streamRun{urls: []string{e.data.dir}, opts: o})
			if err == nil {
				err = expectRows(m, e.data.spec.Rows())
			}
			return m, err
		})
		if err != nil {
			return fmt.Errorf("go %s: %w", p.suffix, err)
		}
		goRate[p.suffix] = m.rowsPerSec()
	}

	type run struct {
		Name    string   `json:"name"`
		Mode    string   `json:"mode"`
		Columns []string `json:"columns"`
		Shuffle bool     `json:"shuffle"`
		Workers int      `json:"workers"`
	}
	var runs []run
	for _, mode := range []string{"numpy", "torch"} {
		if mode == "torch" && !hasTorch {
			continue
		}
		for _, p := range pythonPasses {
			runs = append(runs, run{Name: mode + "/" + p.suffix, Mode: mode, Columns: p.columns, Shuffle: p.shuffle})
		}
	}
	if hasTorch {
		for _, k := range []int{0, 2, 4} {
			runs = append(runs, run{Name: fmt.Sprintf("dataloader/%d", k), Mode: "dataloader", Columns: pythonPasses[1].columns, Shuffle: true, Workers: k})
		}
	}
	arg, _ := json.Marshal(map[string]any{"dir": e.data.dir, "batch_size": e.cfg.BatchSize, "reps": max(e.cfg.Reps, 1), "runs": runs})
	cmd := exec.CommandContext(ctx, py, filepath.Join(root, "bench", "python_bench.py"), string(arg))
	cmd.Env = append(os.Environ(), "SLUICE_LIBRARY="+lib, "PYTHONPATH="+filepath.Join(root, "python"))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("python bench: %w: %s", err, lastLines(stderr.String(), 10))
	}
	pyRate := map[string]float64{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		var x struct {
			Name     string  `json:"name"`
			Rows     int64   `json:"rows"`
			RowsPerS float64 `json:"rows_per_s"`
		}
		if err := json.Unmarshal(sc.Bytes(), &x); err != nil {
			return fmt.Errorf("python bench output %q: %w", sc.Text(), err)
		}
		if x.Rows != e.data.spec.Rows() {
			return fmt.Errorf("python bench %s delivered %d rows, the dataset has %d", x.Name, x.Rows, e.data.spec.Rows())
		}
		pyRate[x.Name] = x.RowsPerS
	}

	for _, mode := range []string{"numpy", "torch"} {
		name := "python_" + mode
		if _, ok := pyRate[mode+"/"+pythonPasses[0].suffix]; !ok {
			if err := e.emit(newRecord("scenario").set("scenario", name).set("skipped", "run "+pythonSetup).set("skip_reason", py+" cannot import torch")); err != nil {
				return err
			}
			continue
		}
		r := newRecord("scenario").set("scenario", name)
		first := pythonPasses[0].suffix
		r.set("rows", e.data.spec.Rows())
		r.set("rows_per_s", pyRate[mode+"/"+first])
		r.set("go_rows_per_s", goRate[first])
		r.set("ratio_vs_go", pyRate[mode+"/"+first]/goRate[first])
		for _, p := range pythonPasses[1:] {
			r.set(p.suffix+"_rows_per_s", pyRate[mode+"/"+p.suffix])
			r.set(p.suffix+"_ratio_vs_go", pyRate[mode+"/"+p.suffix]/goRate[p.suffix])
		}
		r.set("options", fmt.Sprintf("BatchSize %d; numeric: id, label, x; all: and s (strings); shuffled: Seed 42", e.cfg.BatchSize))
		r.target("ratio_vs_go", ">=", 0.8).target("shuffled_numeric_ratio_vs_go", ">=", 0.8)
		if err := e.emit(r); err != nil {
			return err
		}
	}
	if !hasTorch {
		return nil
	}
	r := newRecord("scenario").set("scenario", "python_dataloader_workers")
	r.set("rows", e.data.spec.Rows())
	r.set("rows_per_s", pyRate["dataloader/0"])
	for _, k := range []int{2, 4} {
		r.set(fmt.Sprintf("workers_%d_rows_per_s", k), pyRate[fmt.Sprintf("dataloader/%d", k)])
	}
	r.set("go_rows_per_s", goRate[pythonPasses[1].suffix])
	r.set("options", "shuffled numeric columns through DataLoader(batch_size=None); rows_per_s: 0 workers; NumSplits 4; spawned persistent workers, second epoch")
	return e.emit(r)
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
