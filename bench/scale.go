package main

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	gcaws "gocloud.dev/aws"
	"gocloud.dev/blob"
	"gocloud.dev/blob/s3blob"
	"golang.org/x/sync/errgroup"

	"github.com/sluicedata/sluice/checkpoint"
	"github.com/sluicedata/sluice/internal/testkit/scratch"
	"github.com/sluicedata/sluice/internal/testkit/synth"
	"github.com/sluicedata/sluice/internal/testkit/trips"
	"github.com/sluicedata/sluice/split"
	"github.com/sluicedata/sluice/stream"
)

// The scale scenario simulates a job of a thousand ranks on this machine:
// each rank a goroutine with its own stream.Open, its own buckets and its
// own connection to the local S3 server, on which every request waits
// scaleLatency first, as a store far away answers. See (*env).scale.
const (
	scaleLatency = 20 * time.Millisecond
	// scaleBatch is the rows of a batch: a quarter of a row group, so that
	// the first batch leaves a split in its middle.
	scaleBatch = 16
	// scaleWorkers is the DataLoader workers per rank of the workers line.
	scaleWorkers = 8
	// scaleSampled is the ranks sampled where every rank's run would take
	// too long here: resumed ranks (each checked split by split against a
	// run from the start), and workers opened as a worker process opens.
	scaleSampled = 16
)

var scaleLines = []string{"scale_1024", "scale_1024_workers8"}

// scaleSize is the job simulated: ranks and splits, the data's files
// and row groups, the ranks alive at once (each holds its plan: the
// machine holds some dozens, not a thousand), and the world sizes the
// merged state resumes at.
type scaleSize struct {
	ranks, splits  int
	spec           synth.Spec
	alive          int
	resumeAt       [2]int
	workersSampled int
}

func (e *env) scaleSize() scaleSize {
	s := scaleSize{
		ranks: 1024, splits: 8192, alive: 32, resumeAt: [2]int{512, 2048}, workersSampled: 2 * scaleSampled,
		// 8,192 row groups of 64 rows in 32 files: small, so that the data
		// is not what is measured, and footers as many as a dataset of
		// 8,192 row groups has (4 columns each).
		spec: synth.Spec{Files: 32, RowsPerFile: 256 * 64, RowGroupRows: 64, StringBytes: 8, Seed: 49},
	}
	switch e.cfg.Mode {
	case "quick":
		s.ranks = 256
	case "tiny": // the harness's own test: the lines, not the figures
		s = scaleSize{ranks: 8, splits: 64, alive: 8, resumeAt: [2]int{4, 16}, workersSampled: 4,
			spec: synth.Spec{Files: 2, RowsPerFile: 32 * 64, RowGroupRows: 64, StringBytes: 8, Seed: 49}}
	}
	return s
}

// scaleRun is what the scenario shares: the data, the buckets' URLs and
// the S3 configuration every rank's client is made from.
type scaleRun struct {
	size      scaleSize
	sc        *scratch.Prefix
	dataURL   string
	dataPath  string // the data objects' URL path: /BUCKET/KEY/data/
	planKey   string
	ckptKey   string
	bucketURL string
	cfg       aws.Config
	transport *http.Transport
	bucket    string
}

// wire is one simulated rank's connection to the object store: every
// request waits the latency first, and is counted by what it asks.
type wire struct {
	base     http.RoundTripper
	delay    time.Duration
	dataPath string
	// reads are range reads of data objects (footers or rows); meta is
	// every other request: lists, stats, the plan, checkpoint objects.
	reads, meta atomic.Int64
	// spans are when each request was sent and answered, for roundTrips.
	mu    sync.Mutex
	spans []trips.Span
}

func (w *wire) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodGet && !req.URL.Query().Has("list-type") && strings.HasPrefix(req.URL.Path, w.dataPath) {
		w.reads.Add(1)
	} else {
		w.meta.Add(1)
	}
	start := time.Now()
	t := time.NewTimer(w.delay)
	select {
	case <-req.Context().Done():
		t.Stop()
		return nil, req.Context().Err()
	case <-t.C:
	}
	resp, err := w.base.RoundTrip(req)
	w.mu.Lock()
	w.spans = append(w.spans, trips.Span{Sent: start, Answered: time.Now()})
	w.mu.Unlock()
	return resp, err
}

// roundTrips is the round trips the requests made so far waited.
func (w *wire) roundTrips() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return trips.Count(w.spans)
}

// open opens a bucket URL of the local S3 server over w.
func (sr *scaleRun) open(w *wire) func(ctx context.Context, bucketURL string) (*blob.Bucket, error) {
	return func(ctx context.Context, bucketURL string) (*blob.Bucket, error) {
		u, err := url.Parse(bucketURL)
		if err != nil {
			return nil, err
		}
		cfg := sr.cfg.Copy()
		cfg.HTTPClient = &http.Client{Transport: w}
		client := s3.NewFromConfig(cfg, func(o *s3.Options) {
			o.UsePathStyle = true
			o.EndpointOptions.DisableHTTPS = true
		})
		return s3blob.OpenBucket(ctx, client, u.Host, nil)
	}
}

func (sr *scaleRun) wire() *wire {
	return &wire{base: sr.transport, delay: scaleLatency, dataPath: sr.dataPath}
}

// rankResult is one rank's start: the time its Open took (its plan, read
// from the plan store or, on the planner, from the footers), the time to
// its first batch after Open, the requests before it, the CPU of the
// process meanwhile, and its state after the first batch.
type rankResult struct {
	open, first        time.Duration
	openCPU            time.Duration // the process's during Open: a figure where the rank runs alone
	openTrips          int           // round trips during Open
	meta, reads, plan  int64         // plan: data reads during Open, i.e. footers
	state              checkpoint.State
	exactSplits, wrong int // resumed ranks: splits checked, and those wrong
}

// rankOpts are a rank's options over its wire w and plan bucket.
func (sr *scaleRun) rankOpts(w *wire, plan *blob.Bucket, rank, world int) stream.Options {
	o := stream.Options{URLs: []string{sr.dataURL}, Rank: rank, WorldSize: world, NumSplits: sr.size.splits, BatchSize: scaleBatch}
	o.Storage.Open = sr.open(w)
	o.PlanStore = &stream.PlanStore{Bucket: plan, Key: sr.planKey}
	return o
}

// startRank opens rank of world, loads st if not nil, and takes the first
// batch; with check, it goes on to the end of the epoch and compares each
// split's rows with those of a run of the rank from the epoch's start
// (st's cursors say where each resumes).
func (sr *scaleRun) startRank(ctx context.Context, rank, world int, st *checkpoint.State, check bool) (res rankResult, err error) {
	w := sr.wire()
	plan, err := sr.open(w)(ctx, sr.bucketURL)
	if err != nil {
		return res, err
	}
	defer plan.Close()
	start, cpu := time.Now(), processCPU()
	ds, err := stream.Open(ctx, sr.rankOpts(w, plan, rank, world))
	if err != nil {
		return res, fmt.Errorf("rank %d of %d: %w", rank, world, err)
	}
	defer ds.Close()
	res.open, res.openCPU, res.openTrips = time.Since(start), processCPU()-cpu, w.roundTrips()
	res.plan = w.reads.Load()
	if st != nil {
		if err := ds.LoadStateDict(*st); err != nil {
			return res, fmt.Errorf("rank %d of %d: %w", rank, world, err)
		}
	}
	start = time.Now()
	var got map[int][]int64
	if check {
		got = map[int][]int64{}
	}
	n := 0
	err = splitRows(ctx, ds, got, func() bool {
		if n++; n == 1 {
			res.first = time.Since(start)
			res.meta, res.reads = w.meta.Load(), w.reads.Load()-res.plan
			res.state = ds.StateDict()
		}
		return check
	})
	if err != nil {
		return res, fmt.Errorf("rank %d of %d: %w", rank, world, err)
	}
	if n == 0 {
		return res, fmt.Errorf("rank %d of %d: no batch", rank, world)
	}
	if !check {
		return res, nil
	}
	// The reference: the same rank from the start of the epoch.
	ref, err := stream.Open(ctx, sr.rankOpts(w, plan, rank, world))
	if err != nil {
		return res, fmt.Errorf("rank %d of %d: reference: %w", rank, world, err)
	}
	defer ref.Close()
	want := map[int][]int64{}
	if err := splitRows(ctx, ref, want, func() bool { return true }); err != nil {
		return res, fmt.Errorf("rank %d of %d: reference: %w", rank, world, err)
	}
	for _, s := range split.Owned(sr.size.splits, rank, world) {
		res.exactSplits++
		from := st.Cursors[s].Rows
		if from > int64(len(want[s])) || !slices.Equal(got[s], want[s][from:]) {
			res.wrong++
		}
	}
	return res, nil
}

// splitRows iterates ds's epoch, calling after each batch (stopping where
// it returns false) and, where rows is not nil, appending the batch's ids
// to the rows of the split it came from: the one whose cursor moved (a
// batch never mixes splits).
func splitRows(ctx context.Context, ds *stream.Dataset, rows map[int][]int64, after func() bool) error {
	var prev []split.Cursor
	if rows != nil {
		prev = ds.StateDict().Cursors
	}
	for b, err := range ds.Batches(ctx) {
		if err != nil {
			return err
		}
		if rows != nil {
			cur := ds.StateDict().Cursors
			moved := -1
			for s := range cur {
				if cur[s] != prev[s] {
					moved = s
					break
				}
			}
			if moved < 0 {
				return fmt.Errorf("a batch of %d rows moved no cursor", b.NumRows())
			}
			col := b.Column(b.Schema().FieldIndices("id")[0]).(*array.Int64)
			rows[moved] = append(rows[moved], col.Int64Values()...)
			prev = cur
		}
		if !after() {
			break
		}
	}
	return nil
}

// scale is the scale_1024 scenario. Rank 0 plans alone (reading every
// footer) and writes the shared plan; then every other rank starts, at
// most size.alive at once, each reading the plan and taking its first
// batch. Every rank then saves its state at one step of a bucket
// checkpoint store (all at once), the store judges the step complete, and
// the states merge; the merged state resumes at two other world sizes,
// a sample of ranks each, checked split by split against runs from the
// epoch's start. The workers line does the same at scaleWorkers consumers
// a rank, where Python's DataLoader makes each worker rank
// rank×workers+worker of world×workers.
func (e *env) scale(ctx context.Context) (err error) {
	if scratch.S3.URL() == "" {
		for _, l := range scaleLines {
			if err := e.emit(newRecord("scenario").set("scenario", l).set("skipped", "run "+scratch.Setup)); err != nil {
				return err
			}
		}
		return nil
	}
	sr, err := e.newScaleRun(ctx)
	if err != nil {
		return err
	}
	defer func() {
		sr.transport.CloseIdleConnections()
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Minute)
		defer cancel()
		if cerr := sr.sc.Close(cctx); err == nil {
			err = cerr
		}
	}()
	size := sr.size
	r := newRecord("scenario").set("scenario", scaleLines[0]).set("measure", "scale")
	r.set("options", fmt.Sprintf("%d ranks (goroutines, each its own Open, buckets and S3 client; %d alive at once; plan load figures of %d ranks started one at a time), NumSplits %d, %d files of %d row groups of %d rows on the local S3 server, %d ms before every request, BatchSize %d, a PlanStore and a bucket checkpoint store",
		size.ranks, size.alive, min(scaleSampled, size.ranks-1), size.splits, size.spec.Files, size.spec.RowsPerFile/size.spec.RowGroupRows, size.spec.RowGroupRows, scaleLatency.Milliseconds(), scaleBatch))
	r.set("ranks", size.ranks).set("splits", size.splits).set("row_groups", size.spec.Files*size.spec.RowsPerFile/size.spec.RowGroupRows)
	r.set("latency_ms", scaleLatency.Milliseconds()).set("alive", size.alive).set("cores", runtime.GOMAXPROCS(0))

	// Rank 0 plans; then one rank alone, for its memory and its CPU.
	runtime.GC()
	start := time.Now()
	states := make([]checkpoint.State, size.ranks)
	planner, err := sr.startRank(ctx, 0, size.ranks, nil, false)
	if err != nil {
		return err
	}
	states[0] = planner.state
	r.set("plan_seconds", planner.open.Seconds()).set("planner_footer_reads", planner.plan).set("planner_meta_requests", planner.meta)
	attrs, err := sr.sc.Bucket.Attributes(ctx, sr.planKey)
	if err != nil {
		return err
	}
	r.set("plan_object_bytes", attrs.Size)
	if err := sr.rankMemory(ctx, r); err != nil {
		return err
	}
	// A rank's plan load as on a machine of its own: a sample of ranks,
	// one at a time.
	var alone []int
	for i := range min(scaleSampled, size.ranks-1) {
		alone = append(alone, 1+(i*(size.ranks-1)/scaleSampled+i)%(size.ranks-1))
	}
	if err := sr.aloneFigures(ctx, r, alone, size.ranks); err != nil {
		return err
	}

	// Every other rank, size.alive at once.
	results := make([]rankResult, size.ranks)
	results[0] = planner
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(size.alive)
	for rank := 1; rank < size.ranks; rank++ {
		g.Go(func() error {
			res, err := sr.startRank(gctx, rank, size.ranks, nil, false)
			results[rank], states[rank] = res, res.state
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	r.set("first_batch_all_seconds", time.Since(start).Seconds())
	loaders := results[1:]
	r.set("plan_load_contended_median_seconds", median(each(loaders, func(x rankResult) float64 { return x.open.Seconds() })))
	r.set("footer_reads_per_rank", maxOf(each(loaders, func(x rankResult) float64 { return float64(x.plan) })))
	r.set("meta_requests_per_rank", maxOf(each(loaders, func(x rankResult) float64 { return float64(x.meta) })))
	r.set("data_requests_per_rank", median(each(loaders, func(x rankResult) float64 { return float64(x.reads) })))

	merged, err := sr.checkpointStep(ctx, r, "ranks", states)
	if err != nil {
		return err
	}
	var wrong []string
	for _, world := range size.resumeAt {
		w, err := sr.resume(ctx, r, &merged, world)
		if err != nil {
			return err
		}
		wrong = append(wrong, w...)
	}
	r.target("state_bytes", "<=", 64<<10).target("merge_seconds", "<=", 1).target("judge_seconds", "<=", 2)
	r.target("plan_load_median_seconds", "<=", 0.05).target("footer_reads_per_rank", "<=", 0).target("meta_requests_per_rank", "<=", 4)
	if err := e.emit(r); err != nil {
		return err
	}
	if len(wrong) > 0 {
		return fmt.Errorf("resumed ranks delivered other rows than a run from the start: %s", strings.Join(wrong, "; "))
	}
	return e.emit(sr.workers(ctx, merged))
}

// newScaleRun writes the data and opens what every rank shares.
func (e *env) newScaleRun(ctx context.Context) (*scaleRun, error) {
	sr := &scaleRun{size: e.scaleSize(), bucketURL: scratch.S3.URL()}
	u, err := url.Parse(sr.bucketURL)
	if err != nil {
		return nil, err
	}
	sr.bucket = u.Host
	// The test URL's two S3-specific parameters; the rest (endpoint,
	// region) are gocloud's common AWS ones.
	q := u.Query()
	q.Del("use_path_style")
	q.Del("disable_https")
	if sr.cfg, err = gcaws.V2ConfigFromURLParams(ctx, q); err != nil {
		return nil, err
	}
	sr.transport = http.DefaultTransport.(*http.Transport).Clone()
	sr.transport.MaxIdleConnsPerHost = 256
	if sr.sc, err = scratch.New(ctx, scratch.S3, "sluice-bench-scale"); err != nil {
		return nil, err
	}
	sr.dataURL = sr.sc.URL("data/")
	sr.dataPath = "/" + sr.bucket + "/" + sr.sc.Key + "data/"
	sr.planKey = sr.sc.Key + "plan.json"
	sr.ckptKey = sr.sc.Key + "ckpt/"
	if err := synth.WriteBucket(ctx, sr.sc.Bucket, sr.sc.Key+"data/", sr.size.spec); err != nil {
		sr.sc.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	return sr, nil
}

// rankMemory opens rank 1 alone, after a collection, and sets the heap its
// plan holds after Open and its plan and pipeline after the first batch.
func (sr *scaleRun) rankMemory(ctx context.Context, r *record) error {
	w := sr.wire()
	plan, err := sr.open(w)(ctx, sr.bucketURL)
	if err != nil {
		return err
	}
	defer plan.Close()
	var before, opened, first runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	ds, err := stream.Open(ctx, sr.rankOpts(w, plan, 1, sr.size.ranks))
	if err != nil {
		return err
	}
	defer ds.Close()
	runtime.GC()
	runtime.ReadMemStats(&opened)
	for _, err := range ds.Batches(ctx) {
		if err != nil {
			return err
		}
		break
	}
	runtime.GC()
	runtime.ReadMemStats(&first)
	r.set("rank_plan_bytes", int64(opened.HeapAlloc)-int64(before.HeapAlloc))
	r.set("rank_pipeline_bytes", int64(first.HeapAlloc)-int64(opened.HeapAlloc))
	return nil
}

// aloneFigures starts ranks of world one at a time, as each would on a
// machine of its own, and sets the time their plans took to load, the
// CPU each took (the process's: nothing else of it runs meanwhile, but
// the machine's neighbours do), its requests and the time to its first
// batch.
func (sr *scaleRun) aloneFigures(ctx context.Context, r *record, ranks []int, world int) error {
	results := make([]rankResult, len(ranks))
	cpu := processCPU()
	for i, rank := range ranks {
		var err error
		if results[i], err = sr.startRank(ctx, rank, world, nil, false); err != nil {
			return err
		}
	}
	r.set("plan_load_cpu_seconds", (processCPU()-cpu).Seconds()/float64(len(ranks)))
	r.set("open_cpu_seconds_median", median(each(results, func(x rankResult) float64 { return x.openCPU.Seconds() })))
	r.set("open_round_trips", maxOf(each(results, func(x rankResult) float64 { return float64(x.openTrips) })))
	r.set("plan_load_sampled_ranks", len(ranks))
	r.set("plan_load_median_seconds", median(each(results, func(x rankResult) float64 { return x.open.Seconds() })))
	r.set("plan_load_max_seconds", maxOf(each(results, func(x rankResult) float64 { return x.open.Seconds() })))
	r.set("first_batch_median_seconds", median(each(results, func(x rankResult) float64 { return x.first.Seconds() })))
	r.set("footer_reads_per_rank", maxOf(each(results, func(x rankResult) float64 { return float64(x.plan) })))
	r.set("meta_requests_per_rank", maxOf(each(results, func(x rankResult) float64 { return float64(x.meta) })))
	r.set("data_requests_per_rank", median(each(results, func(x rankResult) float64 { return float64(x.reads) })))
	return nil
}

// checkpointStep saves states (one per rank of their world) at one step
// of a bucket checkpoint store, every rank at once through its own store,
// and sets the figures of the step: the state's bytes, the save, the
// store's judging the step complete, and Merge of the states. It returns
// the step merged, checked equal to Merge's.
func (sr *scaleRun) checkpointStep(ctx context.Context, r *record, run string, states []checkpoint.State) (checkpoint.State, error) {
	var most int
	for _, st := range states {
		b, err := checkpoint.Encode(st)
		if err != nil {
			return checkpoint.State{}, err
		}
		most = max(most, len(b))
	}
	r.set("state_bytes", most)
	// Every rank's store, opened before the step as a job opens it at its
	// start.
	stores := make([]*checkpoint.BucketStore, len(states))
	wires := make([]*wire, len(states))
	var mu sync.Mutex
	var buckets []*blob.Bucket
	defer func() {
		for _, b := range buckets {
			b.Close()
		}
	}()
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(64)
	for i := range states {
		g.Go(func() error {
			wires[i] = sr.wire()
			b, err := sr.open(wires[i])(gctx, sr.bucketURL)
			if err != nil {
				return err
			}
			mu.Lock()
			buckets = append(buckets, b)
			mu.Unlock()
			stores[i], err = checkpoint.OpenBucketStore(gctx, b, sr.ckptKey)
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return checkpoint.State{}, err
	}
	for _, w := range wires {
		w.meta.Store(0)
	}
	start := time.Now()
	g, gctx = errgroup.WithContext(ctx)
	for i, st := range states {
		g.Go(func() error { return stores[i].Save(gctx, run, 1, st.Rank, st) })
	}
	if err := g.Wait(); err != nil {
		return checkpoint.State{}, err
	}
	r.set("save_step_seconds", time.Since(start).Seconds())
	r.set("save_requests_median", median(each(wires, func(w *wire) float64 { return float64(w.meta.Load()) })))
	r.set("save_requests_max", maxOf(each(wires, func(w *wire) float64 { return float64(w.meta.Load()) })))

	// A rank that resumes judges the newest step: it lists the run, reads
	// the marker and the step's summary, and lists the step to see every
	// state as summarized (else it reads every rank's state and merges
	// them).
	judge := wires[0]
	judge.meta.Store(0)
	start = time.Now()
	if step, err := stores[0].Latest(ctx, run); err != nil || step != 1 {
		return checkpoint.State{}, fmt.Errorf("latest step %d, %v: want step 1, complete", step, err)
	}
	r.set("judge_seconds", time.Since(start).Seconds())
	r.set("judge_requests", judge.meta.Load())
	_, err := sr.sc.Bucket.Attributes(ctx, sr.ckptKey+run+"/00000000000000000001/COMPLETE.summary")
	r.set("step_summary", err == nil)
	// Every rank resumes the step at the world size that saved it, as
	// Checkpointer.Resume does: Latest, then its own state.
	for _, w := range wires {
		w.meta.Store(0)
	}
	start = time.Now()
	g, gctx = errgroup.WithContext(ctx)
	g.SetLimit(64)
	for i, st := range states {
		g.Go(func() error {
			if step, err := stores[i].Latest(gctx, run); err != nil || step != 1 {
				return fmt.Errorf("rank %d: latest step %d, %v: want step 1, complete", st.Rank, step, err)
			}
			got, err := stores[i].Load(gctx, run, 1, st.Rank)
			if err == nil && !reflect.DeepEqual(got, st) {
				err = fmt.Errorf("rank %d loaded another state than it saved", st.Rank)
			}
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return checkpoint.State{}, err
	}
	r.set("resume_step_seconds", time.Since(start).Seconds())
	r.set("resume_requests_per_rank", maxOf(each(wires, func(w *wire) float64 { return float64(w.meta.Load()) })))
	stored, err := stores[0].LoadStep(ctx, run, 1)
	if err != nil {
		return checkpoint.State{}, err
	}
	var merged checkpoint.State
	best := time.Duration(1 << 62)
	for range 3 {
		start = time.Now()
		if merged, err = checkpoint.Merge(states...); err != nil {
			return checkpoint.State{}, err
		}
		best = min(best, time.Since(start))
	}
	r.set("merge_seconds", best.Seconds())
	if !reflect.DeepEqual(stored, merged) {
		return checkpoint.State{}, fmt.Errorf("the store merged step 1 otherwise than Merge")
	}
	return merged, nil
}

// resume loads merged on scaleSampled ranks of world, spread over it, one
// at a time (as each on a machine of its own), and checks every split of
// theirs against runs from the epoch's start. It sets the time to their
// first batch and whether every split resumed exactly, and returns what
// was wrong.
func (sr *scaleRun) resume(ctx context.Context, r *record, merged *checkpoint.State, world int) ([]string, error) {
	n := min(scaleSampled, world)
	results := make([]rankResult, n)
	for i := range n {
		// Spread, and not all at the start of a stride: rank i*world/n+i.
		var err error
		if results[i], err = sr.startRank(ctx, (i*world/n+i)%world, world, merged, true); err != nil {
			return nil, err
		}
	}
	var wrong []string
	splits := 0
	for _, res := range results {
		splits += res.exactSplits
		if res.wrong > 0 {
			wrong = append(wrong, fmt.Sprintf("at world size %d, rank %d: %d of %d splits", world, res.state.Rank, res.wrong, res.exactSplits))
		}
	}
	p := fmt.Sprintf("resume_%d_", world)
	r.set(p+"exact", len(wrong) == 0 && splits > 0)
	r.set(p+"sampled_ranks", n).set(p+"sampled_splits", splits)
	r.set(p+"first_batch_median_seconds", median(each(results, func(x rankResult) float64 { return (x.open + x.first).Seconds() })))
	r.set(p+"first_batch_max_seconds", maxOf(each(results, func(x rankResult) float64 { return (x.open + x.first).Seconds() })))
	return wrong, nil
}

// workers is the workers line: each rank's scaleWorkers DataLoader
// workers are, as Python's loader makes them, ranks rank×workers+worker of
// a world of ranks×workers, each its own process with its own Open. A
// sample of them starts one at a time, as each would on a core of its
// own. Their states are cut from the merged step of the ranks (each
// worker's split at the cursor the merge holds), as workers at that
// position take them; the loader keeps them encoded, a rank's workers'
// in its state_dict, and each worker that resumes a merged loader state
// merges every worker's (MergeEncoded, as the C library's merge does).
func (sr *scaleRun) workers(ctx context.Context, merged checkpoint.State) *record {
	size := sr.size
	consumers := size.ranks * scaleWorkers
	r := newRecord("scenario").set("scenario", scaleLines[1]).set("measure", "scale")
	r.set("options", fmt.Sprintf("%d ranks of %d DataLoader workers: %d consumers, worker w of rank k is rank k×%d+w of %d, each its own Open; %d of them started, one at a time; the workers' states cut from the ranks' merged step",
		size.ranks, scaleWorkers, consumers, scaleWorkers, consumers, size.workersSampled))
	r.set("ranks", size.ranks).set("workers", scaleWorkers).set("consumers", consumers).set("splits", size.splits)
	fail := func(err error) *record { return r.set("error", err.Error()) }
	if size.splits%consumers != 0 {
		return fail(fmt.Errorf("NumSplits %d is not a multiple of %d consumers", size.splits, consumers))
	}
	n := size.workersSampled
	var sample []int
	for i := range n {
		rank, worker := (i*size.ranks/n+i)%size.ranks, i%scaleWorkers
		sample = append(sample, rank*scaleWorkers+worker)
	}
	if err := sr.aloneFigures(ctx, r, sample, consumers); err != nil {
		return fail(err)
	}
	attrs, err := sr.sc.Bucket.Attributes(ctx, sr.planKey)
	if err != nil {
		return fail(err)
	}
	// Every worker process reads the plan.
	r.set("plan_reads_bytes", int64(consumers)*attrs.Size)
	enc := make([][]byte, consumers)
	most, loader, all := 0, 0, 0
	for k := range enc {
		if enc[k], err = checkpoint.Encode(consumerState(merged, k, consumers)); err != nil {
			return fail(err)
		}
		most = max(most, len(enc[k]))
		all += len(enc[k])
		if k < scaleWorkers {
			loader += len(enc[k])
		}
	}
	r.set("state_bytes", most).set("loader_state_bytes", loader).set("merged_loader_state_bytes", all)
	var again checkpoint.State
	best := time.Duration(1 << 62)
	for range 3 {
		start := time.Now()
		if again, err = checkpoint.MergeEncoded(enc...); err != nil {
			return fail(err)
		}
		best = min(best, time.Since(start))
	}
	r.set("merge_seconds", best.Seconds())
	again.WorldSize = merged.WorldSize // a merge keeps the world size that saved it
	if !reflect.DeepEqual(again, merged) {
		return fail(fmt.Errorf("the workers' states merge otherwise than the ranks' they were cut from"))
	}
	r.target("state_bytes", "<=", 64<<10).target("merge_seconds", "<=", 1)
	r.target("plan_load_median_seconds", "<=", 0.05).target("footer_reads_per_rank", "<=", 0).target("meta_requests_per_rank", "<=", 4)
	return r
}

// consumerState is the state rank k of world takes where merged says
// every split stands: its own splits' cursors, the others' zero.
func consumerState(merged checkpoint.State, k, world int) checkpoint.State {
	st := merged.Clone()
	st.Rank, st.WorldSize, st.Next = k, world, 0
	clear(st.Cursors)
	clear(st.Skipped)
	for _, s := range split.Owned(st.NumSplits, k, world) {
		st.Cursors[s] = merged.Cursors[s]
		if st.Skipped != nil {
			st.Skipped[s] = merged.Skipped[s]
		}
	}
	if merged.Epochs != nil {
		epochs := make([]int64, st.NumSplits)
		for s := range epochs {
			epochs[s] = merged.SplitEpoch(s)
		}
		st.SetEpochs(epochs)
	}
	return st
}

// each is f of every element of xs.
func each[T any](xs []T, f func(T) float64) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = f(x)
	}
	return out
}
