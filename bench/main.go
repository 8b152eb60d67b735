// Command bench measures sluice's stream against a plain arrow-go Parquet
// read on the same machine, in the same process:
//
//	go run ./bench [-quick] [-out DIR] [-scenarios a,b] [-data DIR]
//
// It writes a synthetic dataset (or reuses one under -data), runs the
// scenarios and prints one JSON object per line to stdout: first a line of
// kind "machine" (cores, CPU model, Go version, date, dataset), then one
// line per scenario result. Every throughput is also given as a ratio to
// the baseline, the "floor" scenario (one goroutine, pqarrow, file after
// file), because absolute figures on a shared machine are noisy. With -out
// the lines also go to DIR/results.jsonl and a table to DIR/results.md.
//
// Targets the results are checked against are printed on their lines as
// "target" and "met"; a missed target does not change the exit status, an
// error does.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"time"
)

func main() {
	if err := cli(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func cli(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	quick := fs.Bool("quick", false, "a 2M-row dataset and fewer repetitions (under a minute on 2 cores)")
	tiny := fs.Bool("tiny", false, "a few thousand rows: a smoke test of every scenario, figures meaningless")
	out := fs.String("out", "", "also write results.jsonl and results.md into this directory")
	data := fs.String("data", "", "keep the generated dataset in this directory and reuse it on later runs (default: a temporary directory, removed at the end)")
	only := fs.String("scenarios", "", "comma-separated scenarios or groups to run (default all): "+strings.Join(scenarioNames(), ", "))
	reps := fs.Int("reps", 0, "runs of each throughput measurement, the best is kept (default: 2 with -quick, 3 otherwise)")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile of the scenarios after floor (of floor if it runs alone) to this file")
	transformMS := fs.Float64("transform-ms", 0, "CPU per batch of the transform scenarios, in milliseconds (default 1)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
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
	if *only != "" {
		cfg.Only = strings.Split(*only, ",")
	}
	cfg.Log = slog.New(slog.NewTextHandler(stderr, nil))
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
	return run(ctx, cfg, stdout)
}

// run generates or finds the dataset, runs the selected scenarios and
// reports every result line to stdout (and to cfg.OutDir).
func run(ctx context.Context, cfg config, stdout io.Writer) error {
	selected, err := selectScenarios(cfg.Only)
	if err != nil {
		return err
	}
	rep, err := newReporter(stdout, cfg.OutDir)
	if err != nil {
		return err
	}
	dir, cleanup, err := prepareData(ctx, cfg)
	if err != nil {
		return err
	}
	defer cleanup()
	env := &env{cfg: cfg, data: dir, rep: rep, samples: map[string]sample{}}
	rep.emit(machineRecord(cfg, dir))

	defer env.stopProfile()
	if err := env.runAll(ctx, selected); err != nil {
		return err
	}
	return rep.close()
}
