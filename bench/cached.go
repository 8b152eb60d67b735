package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"time"

	"github.com/sluicedata/sluice/internal/testkit/scratch"
	"github.com/sluicedata/sluice/metrics"
	"github.com/sluicedata/sluice/storage"
	"github.com/sluicedata/sluice/stream"
)

// The cached lines of the object_stores scenario: the dataset on the local
// S3 server, cachedLatency added to every request, read through a
// node-local cache (stream.Options.CacheDir).
const cachedLatency = 20 * time.Millisecond

var cachedLines = []string{"s3_cached_epoch2", "s3_cached_4ranks"}

// cachedRanks is how many processes share the cache in s3_cached_4ranks.
const cachedRanks = 4

// The variables that make the harness a rank of s3_cached_4ranks (see
// cachedRankChild).
const (
	cachedRankEnv = "SLUICE_BENCH_CACHED_RANK"
	cachedURLEnv  = "SLUICE_BENCH_CACHED_URL"
	cachedDirEnv  = "SLUICE_BENCH_CACHED_DIR"
	cachedBatch   = "SLUICE_BENCH_CACHED_BATCH"
)

// cachedS3 measures the cache on the S3 server: s3_cached_epoch2 streams
// the second epoch of a dataset whose first filled the cache (opened
// again, at Epoch 1, as a restarted job would be), alternating with the
// same stream of the local files, and counts what it read from the bucket;
// s3_cached_4ranks runs four processes, ranks of one job, on one empty
// cache at once, and compares the bytes they fetched from the bucket
// between them with the dataset's.
func (e *env) cachedS3(ctx context.Context) error {
	if scratch.S3.URL() == "" {
		for _, l := range cachedLines {
			if err := e.emit(newRecord("scenario").set("scenario", l).set("skipped", "run "+scratch.Setup)); err != nil {
				return err
			}
		}
		return nil
	}
	return e.withUploaded(ctx, scratch.S3, "sluice-bench-cached", func(sc *scratch.Prefix, datasetBytes int64) error {
		return e.cachedEpochs(ctx, sc, datasetBytes)
	})
}

// cachedEpochs runs s3_cached_epoch2 and then s3_cached_4ranks on the
// uploaded files.
func (e *env) cachedEpochs(ctx context.Context, sc *scratch.Prefix, datasetBytes int64) error {
	cacheDir, err := os.MkdirTemp("", "sluice-bench-cache-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(cacheDir)

	o := e.opts()
	o.CacheDir, o.CacheBytes = cacheDir, max(4*datasetBytes, 64<<20)
	var local, cached epochRun
	var localRates, cachedRates []float64
	for i := range max(e.cfg.Reps, 1) {
		runtime.GC()
		l, err := secondEpoch(ctx, e.data.dir, e.opts(), 0)
		if err == nil {
			err = expectRows(l.m, e.data.spec.Rows())
		}
		if err != nil {
			return fmt.Errorf("local files: %w", err)
		}
		runtime.GC()
		c, err := secondEpoch(ctx, sc.URL(""), o, cachedLatency)
		if err == nil {
			err = expectRows(c.m, e.data.spec.Rows())
		}
		if err != nil {
			return fmt.Errorf("s3_cached_epoch2: %w", err)
		}
		localRates, cachedRates = append(localRates, l.m.rowsPerSec()), append(cachedRates, c.m.rowsPerSec())
		if i == 0 || l.m.rowsPerSec() > local.m.rowsPerSec() {
			local = l
		}
		if i == 0 || c.m.rowsPerSec() > cached.m.rowsPerSec() {
			cached = c
		}
	}
	cached.m.readBytes = cached.epochs[1].BucketBytes
	r := e.result(cachedLines[0], sample{m: cached.m, rates: cachedRates, baseline: e.floor})
	r.set("options", fmt.Sprintf("defaults, CacheDir; the second epoch of a dataset on the S3 server with %d ms added to every request, timed alone after the first (a new cache each run); against the second epoch of the local files, alternating", cachedLatency.Milliseconds()))
	r.set("latency_ms", cachedLatency.Milliseconds())
	r.set("local_rows_per_s", local.m.rowsPerSec())
	r.set("local_runs_rows_per_s", roundAll(localRates))
	r.set("ratio_vs_local", cached.m.rowsPerSec()/local.m.rowsPerSec())
	// CPU per row is what a loaded machine blurs least: the cache's cost
	// beside the local files', whatever the others running meanwhile.
	r.set("cpu_seconds", cached.m.cpuSeconds).set("local_cpu_seconds", local.m.cpuSeconds)
	r.set("cpu_ratio_vs_local", cached.m.cpuSeconds/local.m.cpuSeconds)
	r.set("epoch1_seconds", cached.firstSeconds)
	r.set("bucket_bytes_epoch1", cached.epochs[0].BucketBytes)
	r.set("bucket_bytes_epoch2", cached.epochs[1].BucketBytes)
	r.set("cache_hit_bytes_epoch2", cached.epochs[1].CacheHitBytes)
	// The second epoch reads nothing from the bucket; its bytes read over
	// those stored are the first's.
	r.set("io_amplification", float64(cached.epochs[0].BucketBytes)/float64(cached.m.storedBytes))
	r.target("ratio_vs_local", ">=", 0.95).target("bucket_bytes_epoch2", "<=", 0)
	if err := e.emit(r); err != nil {
		return err
	}
	return e.cachedRanks(ctx, sc.URL(""), datasetBytes)
}

// epochRun is a dataset's second epoch, timed alone.
type epochRun struct {
	m            measurement // of the second epoch
	firstSeconds float64     // open and the first epoch
	epochs       []metrics.EpochReads
}

// secondEpoch opens the dataset at url with o (a fresh cache in o.CacheDir
// where it is set: the folder is emptied first), streams its first epoch,
// then times its second, every range read delayed by latency.
func secondEpoch(ctx context.Context, url string, o stream.Options, latency time.Duration) (epochRun, error) {
	var r epochRun
	if o.CacheDir != "" {
		if err := os.RemoveAll(o.CacheDir); err != nil {
			return r, err
		}
	}
	o.URLs = []string{url}
	if latency > 0 {
		o.Storage.Wrap = func(b storage.Bucket) storage.Bucket { return withLatency(b, latency) }
	}
	start, cpu := time.Now(), processCPU()
	ds, err := stream.Open(ctx, o)
	if err != nil {
		return r, err
	}
	defer ds.Close()
	for _, f := range ds.Files() {
		for _, u := range f.Units {
			r.m.storedBytes += u.Bytes
		}
	}
	for epoch := range 2 {
		if epoch == 1 {
			r.firstSeconds = time.Since(start).Seconds()
			start, cpu = time.Now(), processCPU()
		}
		for b, err := range ds.Batches(ctx) {
			if err != nil {
				return r, err
			}
			if epoch == 1 {
				r.m.rows += b.NumRows()
				r.m.batches++
			}
		}
	}
	r.m.seconds, r.m.cpuSeconds = time.Since(start).Seconds(), (processCPU() - cpu).Seconds()
	r.epochs = ds.Metrics().Snapshot().Epochs
	if len(r.epochs) < 2 {
		return r, fmt.Errorf("the metrics tell %d epochs, want 2 or more", len(r.epochs))
	}
	return r, nil
}

// cachedRanks runs s3_cached_4ranks: cachedRanks processes of this program
// (cachedRankChild), each a rank of one job, on one empty cache at once.
func (e *env) cachedRanks(ctx context.Context, url string, datasetBytes int64) error {
	cacheDir, err := os.MkdirTemp("", "sluice-bench-cache-ranks-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(cacheDir)
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	type result struct {
		Rows        int64   `json:"rows"`
		Seconds     float64 `json:"seconds"`
		BucketBytes int64   `json:"bucket_bytes"`
	}
	start := time.Now()
	var cmds []*exec.Cmd
	var outs []*os.File
	defer func() {
		for _, f := range outs {
			f.Close()
		}
	}()
	for rank := range cachedRanks {
		out, err := os.CreateTemp(cacheDir, "rank-*.json")
		if err != nil {
			return err
		}
		outs = append(outs, out)
		cmd := exec.CommandContext(ctx, exe, "-test.run=^$")
		cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d/%d", cachedRankEnv, rank, cachedRanks), cachedURLEnv+"="+url,
			cachedDirEnv+"="+cacheDir, cachedBatch+"="+strconv.Itoa(e.cfg.BatchSize))
		cmd.Stdout, cmd.Stderr = out, os.Stderr
		if err := cmd.Start(); err != nil {
			return err
		}
		cmds = append(cmds, cmd)
	}
	var rows, bucket int64
	var each []int64
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			return fmt.Errorf("s3_cached_4ranks: rank %d: %w", i, err)
		}
		b, err := os.ReadFile(outs[i].Name())
		if err != nil {
			return err
		}
		var res result
		if err := json.Unmarshal(b, &res); err != nil {
			return fmt.Errorf("s3_cached_4ranks: rank %d printed %q: %w", i, b, err)
		}
		rows += res.Rows
		bucket += res.BucketBytes
		each = append(each, res.BucketBytes)
	}
	seconds := time.Since(start).Seconds()
	if rows != e.data.spec.Rows() {
		return fmt.Errorf("s3_cached_4ranks: the ranks streamed %d rows, want %d", rows, e.data.spec.Rows())
	}
	r := newRecord("scenario").set("scenario", cachedLines[1])
	r.set("options", fmt.Sprintf("defaults, CacheDir; %d processes, ranks of one job (WorldSize %d), on one empty cache at once, from the S3 server with %d ms added to every request; bucket bytes of the first epoch, footers included, over the dataset's",
		cachedRanks, cachedRanks, cachedLatency.Milliseconds()))
	r.set("measure", "latency").set("ranks", cachedRanks).set("latency_ms", cachedLatency.Milliseconds())
	r.set("rows", rows).set("seconds", seconds)
	r.set("dataset_bytes", datasetBytes).set("bucket_bytes", bucket).set("rank_bucket_bytes", each)
	r.set("bucket_bytes_vs_dataset", float64(bucket)/float64(datasetBytes))
	r.target("bucket_bytes_vs_dataset", "<=", 1.02)
	return e.emit(r)
}

// cachedRankChild is the harness run as a rank of s3_cached_4ranks (the
// variables above set): it streams its rank's epoch and prints what it
// read as JSON. handled is false where the variables are not set.
func cachedRankChild() (handled bool) {
	spec := os.Getenv(cachedRankEnv)
	if spec == "" {
		return false
	}
	var rank, world int
	if _, err := fmt.Sscanf(spec, "%d/%d", &rank, &world); err != nil {
		fmt.Fprintln(os.Stderr, "bench: rank:", err)
		os.Exit(2)
	}
	batch, _ := strconv.Atoi(os.Getenv(cachedBatch))
	o := stream.Options{BatchSize: batch}
	o.Rank, o.WorldSize = rank, world
	o.CacheDir, o.CacheBytes = os.Getenv(cachedDirEnv), 64<<30
	m, err := measureStream(context.Background(), streamRun{urls: []string{os.Getenv(cachedURLEnv)}, opts: o, latency: cachedLatency})
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench: rank", rank, err)
		os.Exit(1)
	}
	_ = json.NewEncoder(os.Stdout).Encode(map[string]any{"rows": m.rows, "seconds": m.seconds, "bucket_bytes": m.readBytes})
	return true
}
