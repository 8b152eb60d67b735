// Command bench measures sluice's stream against a plain arrow-go Parquet
// read on the same machine, in the same process:
//
//	go run ./bench [-quick] [-out DIR] [-scenarios a,b] [-data DIR] [-readme docs/performance.md]
//	go run ./bench -from DIR/results.jsonl [-out DIR] [-readme docs/performance.md]
//
// It writes a synthetic dataset (or reuses one under -data), runs the
// scenarios and prints one JSON object per line to stdout: first a line of
// kind "machine" (cores, CPU model, Go version, date, dataset), then one
// line per scenario result. Every throughput is also given as a ratio to
// the baseline, the "floor" scenario (one goroutine, pqarrow, file after
// file), because absolute figures on a shared machine are noisy. The peers
// (arrow-go, and DuckDB and LanceDB through the Node.js scripts of
// bench/peers) read the same files in the same run. With -out the lines also
// go to DIR/results.jsonl, a table to DIR/results.md and plots to DIR/*.png;
// -readme writes the bench results of docs/performance.md from them.
//
// Targets the results are checked against are printed on their lines as
// "target" and "met"; a missed target does not change the exit status, an
// error does.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

func main() {
	if cachedRankChild() {
		return
	}
	runWarm()
	if err := cli(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func cli(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	quick := fs.Bool("quick", false, "a 2M-row dataset and fewer repetitions (about a minute on 2 cores)")
	tiny := fs.Bool("tiny", false, "a few thousand rows: a smoke test of every scenario, figures meaningless")
	out := fs.String("out", "", "also write results.jsonl, results.md and the plots (PNG) into this directory")
	data := fs.String("data", "", "keep the generated dataset (and the peers' Lance table) in this directory and reuse them on later runs (default: a temporary directory, removed at the end)")
	only := fs.String("scenarios", "", "comma-separated scenarios or groups to run (default all): "+strings.Join(scenarioNames(), ", "))
	reps := fs.Int("reps", 0, "runs of each throughput measurement, the best is kept (default: 3)")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile of the scenarios after floor (of floor if it runs alone) to this file")
	transformMS := fs.Float64("transform-ms", 0, "CPU per batch of the transform scenarios, in milliseconds (default 1)")
	peersDir := fs.String("peers", "", "the folder of the Node.js peers (default: bench/peers); set it up with "+setupCommand)
	readme := fs.String("readme", "", "replace the text between "+readmeBegin+" and "+readmeEnd+" in this file (a README) with the results")
	from := fs.String("from", "", "make the reports (-out: results.md and plots; -readme) from this results.jsonl instead of running")
	showProgress := fs.Bool("progress", true, "show a progress bar on stderr when it is a terminal")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	command := commandLine(args)
	if *from != "" {
		if *quick || *tiny || *only != "" || *data != "" {
			return fmt.Errorf("-from makes reports of a finished run: it takes -out and -readme only")
		}
		return report(*from, *out, *readme, command)
	}
	cfg := fullConfig()
	switch {
	case *quick && *tiny:
		return fmt.Errorf("-quick and -tiny exclude each other")
	case *quick:
		cfg = quickConfig()
	case *tiny:
		cfg = tinyConfig()
	}
	if *reps < 0 {
		return fmt.Errorf("-reps %d must be positive", *reps)
	}
	if *reps > 0 {
		cfg.Reps = *reps
	}
	if *transformMS < 0 {
		return fmt.Errorf("-transform-ms %g must be positive", *transformMS)
	}
	if *transformMS > 0 {
		cfg.TransformCPU = time.Duration(*transformMS * float64(time.Millisecond))
	}
	cfg.DataDir = *data
	cfg.OutDir = *out
	cfg.PeersDir = findPeersDir(*peersDir)
	cfg.Command = command
	if *only != "" {
		cfg.Only = strings.Split(*only, ",")
	}
	logTo := stderr
	if *showProgress && isTerminal(stderr) {
		cfg.Progress = newProgress(stderr)
		defer cfg.Progress.close()
		logTo = cfg.Progress
	}
	cfg.Log = slog.New(slog.NewTextHandler(logTo, nil))
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			return err
		}
		defer f.Close()
		cfg.Profile = f
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	lines, err := run(ctx, cfg, stdout)
	if *readme != "" && lines != nil {
		if rerr := updateReadme(*readme, readmeSection(lines, command, filepath.Dir(*readme))); rerr != nil {
			err = errors.Join(err, fmt.Errorf("readme: %w", rerr))
		}
	}
	return err
}

// commandLine is how the harness was started, for the reports.
func commandLine(args []string) string {
	parts := []string{"go run ./bench"}
	for _, a := range args {
		if a == "" || strings.ContainsAny(a, " \t'\"$") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		parts = append(parts, a)
	}
	return strings.Join(parts, " ")
}

// report makes the reports of the results.jsonl at from: results.md and the
// plots into outDir, the Performance section into the readme file.
func report(from, outDir, readme, command string) error {
	if outDir == "" && readme == "" {
		return fmt.Errorf("-from needs -out or -readme")
	}
	f, err := os.Open(from)
	if err != nil {
		return err
	}
	lines, err := loadRecords(f)
	f.Close()
	if err != nil {
		return fmt.Errorf("%s: %w", from, err)
	}
	if outDir != "" {
		if err := os.MkdirAll(outDir, 0o755); err != nil {
			return err
		}
		if err := writeReports(lines, outDir); err != nil {
			return err
		}
	}
	if readme != "" {
		return updateReadme(readme, readmeSection(lines, command, filepath.Dir(readme)))
	}
	return nil
}

// run generates or finds the dataset, runs the selected scenarios and
// reports every result line to stdout (and to cfg.OutDir). It returns the
// lines, also when a peer failed (the error then says which).
func run(ctx context.Context, cfg config, stdout io.Writer) ([]*record, error) {
	selected, err := selectScenarios(cfg.Only)
	if err != nil {
		return nil, err
	}
	rep, err := newReporter(stdout, cfg.OutDir)
	if err != nil {
		return nil, err
	}
	rep.progress = cfg.Progress
	total := 0
	for _, s := range selected {
		total += max(1, len(s.lines))
	}
	cfg.Progress.expect(total)
	cfg.Progress.status("dataset")
	dir, cleanup, err := prepareData(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	var peers *nodePeers
	if slices.ContainsFunc(selected, func(s scenario) bool {
		return slices.Contains([]string{"sequential", "shuffle", "peers", "text", "take", "scaling"}, s.name)
	}) {
		peers = findNodePeers(ctx, cfg.PeersDir)
		if peers.missing != "" {
			cfg.Log.Warn("peers skipped: run "+setupCommand, "reason", peers.missing)
		}
	}
	env := &env{cfg: cfg, data: dir, rep: rep, samples: map[string]sample{}, peers: peers}
	if err := rep.emit(machineRecord(cfg, dir, peers)); err != nil {
		return nil, err
	}

	defer env.stopProfile()
	if err := env.runAll(ctx, selected); err != nil {
		return nil, err
	}
	env.stopProfile()
	cfg.Progress.status("reports")
	if err := rep.close(); err != nil {
		return nil, err
	}
	return rep.lines, errors.Join(env.failed...)
}
