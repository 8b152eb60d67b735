package main

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/parquet/file"
)

// scalingProcs are the GOMAXPROCS the scaling scenario measures at; those
// above the process's own are skipped, as the cores are not there. The list
// is fixed so that line names mean the same on every machine.
var scalingProcs = []int{1, 2, 4, 8, 16}

// scalingOrders are the two orders streamed at each GOMAXPROCS.
var scalingOrders = []struct {
	name    string
	shuffle bool
}{{"sequential", false}, {"shuffled", true}}

// scalingLines are the lines of the scaling scenario, in order.
var scalingLines = func() []string {
	var lines []string
	for _, p := range scalingProcs {
		for _, o := range scalingOrders {
			lines = append(lines, scalingLine(p, o.name))
		}
	}
	return lines
}()

func scalingLine(procs int, order string) string {
	return fmt.Sprintf("scaling_p%d_%s", procs, order)
}

// scalingTarget is the least the default options may stream at, as a share
// of the best ReadConcurrency of the sweep: defaults that derive from the
// cores should leave little to hand-tuning on any machine.
const scalingTarget = 0.9

// sweepReadConcurrency is what a user tuning by hand would try on procs
// cores: one decoder, half, one per core and two per core.
func sweepReadConcurrency(procs int) []int {
	rcs := []int{1, max(1, procs/2), procs, 2 * procs}
	slices.Sort(rcs)
	return slices.Compact(rcs)
}

// defaultConcurrency is what the stream's defaults come to on procs cores,
// for the lines (stream/options.go derives them; this only names them).
func defaultConcurrency(procs int) string {
	rc := max(2, procs)
	return fmt.Sprintf("ReadConcurrency %d, FetchConcurrency %d, TransformConcurrency %d", rc, max(8, 4*rc), procs)
}

// scaling streams the dataset at each GOMAXPROCS of scalingProcs, in both
// orders, with default options and with each ReadConcurrency of a small
// sweep, and (in storage order) with arrow-go's reader on as many
// goroutines. GOMAXPROCS is set for each step and restored at the end: the
// stream reads it at Open, as a user's process on that many cores would.
func (e *env) scaling(ctx context.Context) error {
	procs := runtime.GOMAXPROCS(0)
	defer runtime.GOMAXPROCS(procs)
	for _, p := range scalingProcs {
		for _, o := range scalingOrders {
			if p > procs {
				r := newRecord("scenario").set("scenario", scalingLine(p, o.name))
				r.set("skipped", fmt.Sprintf("run on %d cores or more", p))
				r.set("skip_reason", fmt.Sprintf("GOMAXPROCS is %d", procs))
				if err := e.emit(r); err != nil {
					return err
				}
				continue
			}
			runtime.GOMAXPROCS(p)
			if err := e.scalingAt(ctx, p, o.name, o.shuffle); err != nil {
				return fmt.Errorf("GOMAXPROCS %d, %s: %w", p, o.name, err)
			}
		}
	}
	return nil
}

// scalingAt measures one line. Each repetition runs every setting once, in
// turn, so that all of them see the same machine, starting one further
// along each time so that none always runs first; the fastest run of each
// is kept. The default options equal one point of the sweep when they are
// right, so the ratio compares a setting with itself as often as not:
// twice the usual repetitions keep noise from passing for a difference.
func (e *env) scalingAt(ctx context.Context, procs int, order string, shuffle bool) error {
	configs := append([]int{0}, sweepReadConcurrency(procs)...) // ReadConcurrency; 0: the default
	samples := make([]sample, len(configs))
	// DuckDB's aggregate on as many threads as the line's cores (nativeRuns
	// takes GOMAXPROCS) and arrow-go on as many goroutines, once per
	// repetition before sluice's settings, in storage order only: the
	// fastest reader of the same files, and arrow-go's own. They start the
	// repetition rather than take a turn among the settings: in a turn, the
	// setting after arrow-go's was always the same one, and paid for the
	// heap arrow-go had just freed.
	var native *nativeRuns
	var ag sample
	if !shuffle {
		native = e.nativeRuns(e.data.files, nil, e.data.spec.Rows())
	}
	stream := func(rc int) (measurement, error) {
		o := e.opts()
		o.Shuffle, o.Seed = shuffle, 42
		o.Limits.ReadConcurrency = rc
		return measureStream(ctx, streamRun{urls: []string{e.data.dir}, opts: o})
	}
	for rep := range 2 * max(e.cfg.Reps, 1) {
		if !shuffle {
			native.run(ctx, 1)
			runtime.GC()
			m, err := measureArrowGo(ctx, e.data.files, e.cfg.BatchSize, procs)
			if err == nil {
				err = expectRows(m, e.data.spec.Rows())
			}
			if err != nil {
				return err
			}
			ag.add(m)
		}
		// One unmeasured run of the defaults first: the setting that
		// came right after arrow-go's run (or DuckDB's process) paid for
		// the heap and caches they left (see bench/README.md#warm-runs).
		runtime.GC()
		if _, err := stream(0); err != nil {
			return err
		}
		for k := range configs {
			i := (k + rep) % len(configs)
			runtime.GC()
			m, err := stream(configs[i])
			if err == nil {
				err = expectRows(m, e.data.spec.Rows())
			}
			if err != nil {
				return err
			}
			samples[i].add(m)
			samples[i].baseline = e.floor
		}
	}

	r := e.result(scalingLine(procs, order), samples[0])
	r.set("gomaxprocs", procs)
	r.set("options", fmt.Sprintf("defaults (%s), Shuffle %v", defaultConcurrency(procs), shuffle))
	var sweepRates []float64
	best := 1
	for i := 1; i < len(configs); i++ {
		sweepRates = append(sweepRates, round(samples[i].m.rowsPerSec()))
		if samples[i].m.rowsPerSec() > samples[best].m.rowsPerSec() {
			best = i
		}
	}
	r.set("sweep_read_concurrency", configs[1:])
	r.set("sweep_rows_per_s", sweepRates)
	r.set("best_read_concurrency", configs[best])
	r.set("best_rows_per_s", samples[best].m.rowsPerSec())
	r.set("ratio_default_vs_best", samples[0].m.rowsPerSec()/samples[best].m.rowsPerSec())
	if !shuffle {
		r.set("arrowgo_goroutines", procs)
		r.set("arrowgo_rows_per_s", ag.m.rowsPerSec())
		r.set("arrowgo_runs_rows_per_s", roundAll(ag.rates))
		r.set("ratio_vs_arrowgo", samples[0].m.rowsPerSec()/ag.m.rowsPerSec())
	}
	r.target("ratio_default_vs_best", ">=", scalingTarget)
	if native != nil {
		native.annotate(r)
	}
	return e.emit(r)
}

// measureArrowGo is the floor's reader on goroutines goroutines, what a
// user of arrow-go alone would write for a many-core machine: each takes
// the next file and reads it the floor's way, or, where there are fewer
// files than goroutines, the next row group, so that the files' count does
// not cap it. A row group read alone opens its file, footer included.
func measureArrowGo(ctx context.Context, files []string, batchSize, goroutines int) (measurement, error) {
	if goroutines <= 1 {
		return measureFloor(ctx, files, batchSize)
	}
	type unit struct {
		path      string
		rowGroups []int // nil: all
	}
	start, cpu := time.Now(), processCPU()
	var bytes, requests atomic.Int64
	open := func(path string) (*file.Reader, error) {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		pf, err := file.NewParquetReader(&countingFile{File: f, bytes: &bytes, requests: &requests})
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		return pf, nil
	}
	var units []unit
	if len(files) >= goroutines {
		for _, path := range files {
			units = append(units, unit{path: path})
		}
	} else {
		for _, path := range files {
			pf, err := open(path)
			if err != nil {
				return measurement{}, err
			}
			n := pf.NumRowGroups()
			pf.Close()
			for g := range n {
				units = append(units, unit{path: path, rowGroups: []int{g}})
			}
		}
	}

	var next atomic.Int64
	var mu sync.Mutex
	var total measurement
	var firstErr error
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() {
			var m measurement
			var err error
			for err == nil && ctx.Err() == nil {
				i := int(next.Add(1)) - 1
				if i >= len(units) {
					break
				}
				var pf *file.Reader
				if pf, err = open(units[i].path); err != nil {
					break
				}
				err = readAll(ctx, pf, batchSize, units[i].rowGroups, &m)
				pf.Close() // closes the file
				if err != nil {
					err = fmt.Errorf("%s: %w", units[i].path, err)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			total.rows += m.rows
			total.batches += m.batches
			if err != nil && firstErr == nil {
				firstErr = err
			}
		})
	}
	wg.Wait()
	if firstErr == nil {
		firstErr = ctx.Err()
	}
	if firstErr != nil {
		return total, fmt.Errorf("arrow-go on %d goroutines: %w", goroutines, firstErr)
	}
	total.seconds = time.Since(start).Seconds()
	total.cpuSeconds = (processCPU() - cpu).Seconds()
	total.readBytes = bytes.Load()
	total.readRequests = requests.Load()
	return total, nil
}
