package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/sluicedata/sluice/stream"
)

// takeLines and mixLines are the lines of the random-access and mixing
// scenarios.
var (
	takeLines = []string{"take_random_1024"}
	mixLines  = []string{"mix_3sources"}
)

// takePositions is the positions of one random-access request.
const takePositions = 1024

// takeRequests is how many requests each measurement makes: the first ones
// read what the cache does not hold yet, the others less.
func (e *env) takeRequests() int {
	switch e.cfg.Mode {
	case "tiny":
		return 20
	case "quick":
		return 200
	}
	return 500
}

// takeScenario measures random access: requests of 1,024 distinct positions drawn
// uniformly (seeded) from the shuffled epoch 0 of the bench data, one
// request at a time, every column, with the default cache of decoded row
// groups, and again with no cache (every request reads the row groups its
// positions need); beside LanceDB's takeRowIds over the same rows in the
// same run, when the peers are set up.
func (e *env) takeScenario(ctx context.Context) error {
	requests := e.takeRequests()
	// steady is the rows/s of the last run's second half of requests, once
	// the first have brought the row groups into the cache.
	var steady float64
	run := func(cacheBytes int64, requests int) (measurement, error) {
		o := e.opts()
		o.URLs = []string{e.data.dir}
		o.Shuffle, o.Seed = true, 42
		o.Limits.TakeCacheBytes = cacheBytes
		ds, err := stream.Open(ctx, o)
		if err != nil {
			return measurement{}, err
		}
		defer ds.Close()
		n, err := ds.EpochRows(0)
		if err != nil {
			return measurement{}, err
		}
		r := rand.New(rand.NewPCG(42, 1))
		pos := make([]int64, takePositions)
		start := time.Now()
		cpu0 := processCPU()
		var rows int64
		var half time.Time
		for q := range requests {
			if q == requests/2 {
				half = time.Now()
			}
			// Distinct positions, as the peer's takeRowIds needs.
			seen := make(map[int64]bool, len(pos))
			for i := range pos {
				for {
					pos[i] = r.Int64N(n)
					if !seen[pos[i]] {
						break
					}
				}
				seen[pos[i]] = true
			}
			b, err := ds.Take(ctx, 0, pos)
			if err != nil {
				return measurement{}, err
			}
			if b.NumRows() != takePositions {
				b.Release()
				return measurement{}, fmt.Errorf("take returned %d rows for %d positions", b.NumRows(), takePositions)
			}
			rows += b.NumRows()
			b.Release()
		}
		steady = float64(requests-requests/2) * takePositions / time.Since(half).Seconds()
		snap := ds.Metrics().Snapshot()
		return measurement{rows: rows, batches: int64(requests), seconds: time.Since(start).Seconds(), cpuSeconds: (processCPU() - cpu0).Seconds(),
			readBytes: snap.ReadBytes, readRequests: snap.ReadRequests, storedBytes: storedBytes(ds)}, nil
	}
	var steadies []float64
	s, err := e.paired(ctx, func() (measurement, error) {
		m, err := run(0, requests)
		steadies = append(steadies, steady)
		return m, err
	})
	if err != nil {
		return err
	}
	best := maxOf(steadies)
	// Without a cache every request reads about every row group of the
	// bench data (1,024 positions over 64 row groups): a few requests say
	// what that costs.
	coldRequests := max(requests/20, 3)
	cold, err := run(-1, coldRequests)
	if err != nil {
		return err
	}
	r := e.result("take_random_1024", s)
	r.set("options", fmt.Sprintf("Take of %d distinct uniform random positions of the shuffled epoch 0 (Seed 42), %d requests one at a time, every column, default TakeCacheBytes", takePositions, requests))
	r.set("requests", requests)
	r.set("steady_rows_per_s", best)
	r.set("uncached_rows_per_s", cold.rowsPerSec())
	r.set("uncached_requests", coldRequests)
	if e.peers != nil && e.peers.missing == "" {
		lance, err := e.prepareLance(ctx)
		if err == nil {
			var pr *record
			pr, err = e.peers.run(ctx, "lancedb.mjs", "--scenario", "take", "--db", lance.db, "--table", lance.table,
				"--columns", strings.Join(columnNames(), ","), "--positions", fmt.Sprint(takePositions), "--requests", fmt.Sprint(requests), "--seed", "42")
			if err == nil {
				rate, _ := num(pr.get("rows_per_s"))
				r.set("lancedb_rows_per_s", rate)
				r.set("ratio_vs_lancedb", s.m.rowsPerSec()/rate)
				r.set("uncached_ratio_vs_lancedb", cold.rowsPerSec()/rate)
				r.set("steady_ratio_vs_lancedb", best/rate)
				r.set("lancedb_method", "takeRowIds(ids).select(columns).toArrow(), one request at a time")
				r.target("ratio_vs_lancedb", ">=", 10)
			}
		}
		if err != nil {
			r.set("lancedb_error", err.Error())
			e.failed = append(e.failed, fmt.Errorf("take: lancedb: %w", err))
		}
	} else {
		r.set("lancedb_skipped", "the Node.js peers are not set up: run "+setupCommand)
	}
	return e.emit(r)
}

// mixScenario measures mixing: the bench data as three sources (half, a
// quarter and a quarter of its files) mixed by weights of their sizes,
// shuffled, one epoch by the largest source, against streaming the whole
// data as one shuffled source, each run paired with the other.
func (e *env) mixScenario(ctx context.Context) error {
	files := e.data.files
	if len(files) < 3 {
		return fmt.Errorf("mix needs at least 3 files, the data has %d", len(files))
	}
	a, b := len(files)/2, len(files)*3/4
	groups := [][]string{files[:a], files[a:b], files[b:]}
	mixRun := func() (measurement, error) {
		start := time.Now()
		cpu0 := processCPU()
		var srcs []stream.MixSource
		defer func() {
			for _, s := range srcs {
				s.Dataset.Close()
			}
		}()
		for k, g := range groups {
			o := e.opts()
			o.URLs = g
			o.Shuffle, o.Seed = true, uint64(42+k)
			ds, err := stream.Open(ctx, o)
			if err != nil {
				return measurement{}, err
			}
			srcs = append(srcs, stream.MixSource{Dataset: ds, Weight: float64(len(g))})
		}
		m, err := stream.Mix(srcs, stream.MixOptions{Seed: 42, BatchSize: e.cfg.BatchSize})
		if err != nil {
			return measurement{}, err
		}
		var rows, batches, read, reqs, stored int64
		for _, src := range srcs {
			snap := src.Dataset.Metrics().Snapshot()
			read, reqs, stored = read+snap.ReadBytes, reqs+snap.ReadRequests, stored+storedBytes(src.Dataset)
		}
		for batch, err := range m.Batches(ctx) {
			if err != nil {
				return measurement{}, err
			}
			rows += batch.NumRows()
			batches++
		}
		// What the epoch read: the sources' totals now less before it.
		var readAfter, reqsAfter int64
		for _, src := range srcs {
			snap := src.Dataset.Metrics().Snapshot()
			readAfter, reqsAfter = readAfter+snap.ReadBytes, reqsAfter+snap.ReadRequests
		}
		read, reqs = readAfter-read, reqsAfter-reqs
		return measurement{rows: rows, batches: batches, seconds: time.Since(start).Seconds(), cpuSeconds: (processCPU() - cpu0).Seconds(),
			readBytes: read, readRequests: reqs, storedBytes: stored}, nil
	}
	singleRun := func() (measurement, error) {
		o := e.opts()
		o.Shuffle, o.Seed = true, 42
		return measureStream(ctx, streamRun{urls: []string{e.data.dir}, opts: o})
	}
	var mixed, single []float64
	var best, bestSingle measurement
	// CPU per row, summed over the runs: on a loaded machine it says what
	// mixing costs where wall-clock rates swing with the neighbours.
	var mixCPU, singleCPU, mixRows, singleRows float64
	// A run is a quarter of a second: on a shared machine one neighbour's
	// burst decides a best of three, so the scenario takes at least eleven
	// pairs, each a single-source run then a mixed one (seven left the
	// median pair swinging from 0.76 to 0.96 between runs of one build).
	//
	// Each measured run follows an unmeasured one of its own kind, as an
	// epoch follows an epoch in a training job. A run that follows one of
	// the other kind pays for the heap that one left: run straight after a
	// single-source epoch, a mixed one spent 30-50 ms more system time
	// (page faults: 21-25 thousand against the single source's 7-12
	// thousand), which it does not spend after a mixed epoch, in blocks of
	// its own kind or in a process of its own (CPU ratio 0.86-0.91 with
	// the runs alternated, 0.91-0.95 with each after its own kind; see
	// docs/performance.md).
	pairs := max(e.cfg.Reps, 11)
	warm := func(run func() (measurement, error)) (measurement, error) {
		runtime.GC()
		if _, err := run(); err != nil {
			return measurement{}, err
		}
		runtime.GC()
		return run()
	}
	for i := range pairs {
		s, err := warm(singleRun)
		if err != nil {
			return fmt.Errorf("single source: %w", err)
		}
		m, err := warm(mixRun)
		if err != nil {
			return fmt.Errorf("mix: %w", err)
		}
		single, mixed = append(single, s.rowsPerSec()), append(mixed, m.rowsPerSec())
		mixCPU, singleCPU = mixCPU+m.cpuSeconds, singleCPU+s.cpuSeconds
		mixRows, singleRows = mixRows+float64(m.rows), singleRows+float64(s.rows)
		if i == 0 || m.rowsPerSec() > best.rowsPerSec() {
			best = m
		}
		if i == 0 || s.rowsPerSec() > bestSingle.rowsPerSec() {
			bestSingle = s
		}
	}
	r := e.result("mix_3sources", sample{m: best, rates: mixed, baseline: bestSingle.rowsPerSec()})
	r.set("options", "3 shuffled sources (1/2, 1/4, 1/4 of the files) weighted by size, MixLargest with repetition, one epoch; the single source: all files, Shuffle, Seed 42; each measured run follows an unmeasured one of its own kind")
	r.set("single_rows_per_s", bestSingle.rowsPerSec())
	r.set("single_runs_rows_per_s", roundAll(single))
	r.set("ratio_vs_single", best.rowsPerSec()/bestSingle.rowsPerSec())
	paired := make([]float64, len(mixed))
	for i := range mixed {
		paired[i] = mixed[i] / single[i]
	}
	r.set("pairs", pairs)
	r.set("ratio_vs_single_median_pair", median(paired))
	if mixCPU > 0 && singleCPU > 0 {
		r.set("single_rows_per_cpu_s", singleRows/singleCPU)
		r.set("cpu_ratio_vs_single", (mixRows/mixCPU)/(singleRows/singleCPU))
	}
	r.target("ratio_vs_single", ">=", 0.9)
	return e.emit(r)
}

// storedBytes is the stored size of the dataset's selected columns.
func storedBytes(ds *stream.Dataset) int64 {
	var n int64
	for _, f := range ds.Files() {
		for _, u := range f.Units {
			n += u.Bytes
		}
	}
	return n
}

// median is the middle of xs (the mean of the two middle ones for an even
// count); xs is left as it was.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if n := len(s); n%2 == 1 {
		return s[n/2]
	} else {
		return (s[n/2-1] + s[n/2]) / 2
	}
}
