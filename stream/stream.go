// Package stream is sluice's user API: open a dataset, stream it as Arrow
// record batches (or the user's own type, through Map) in an order that is
// exact, elastic and resumable, and take or load its state.
//
// An epoch is dealt into NumSplits splits; what each split emits, and in
// which order, is a pure function of the data, the order options, the seed
// and the epoch, never of the world size, concurrency or timing. Rank r of
// WorldSize owns the splits s with s mod WorldSize == r and takes batches
// from them round-robin.
package stream

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"golang.org/x/sync/errgroup"

	"github.com/sluicedata/sluice/filter"
	"github.com/sluicedata/sluice/formats"
	"github.com/sluicedata/sluice/formats/parquet"
	"github.com/sluicedata/sluice/metrics"
	"github.com/sluicedata/sluice/permutation"
	"github.com/sluicedata/sluice/prefetch"
	"github.com/sluicedata/sluice/split"
	"github.com/sluicedata/sluice/storage"
	"github.com/sluicedata/sluice/stream/internal/engine"
)

// ErrBusy is returned when a second iteration is started on a Dataset while
// one is running: a dataset has one position, so one consumer.
var ErrBusy = errors.New("stream: an iteration is already running on this dataset")

// ErrEmpty is wrapped where a dataset without rows cannot serve: as a
// source of a mix, whose weight it could not honour. An empty dataset
// itself opens and streams no rows, every epoch.
var ErrEmpty = errors.New("stream: dataset has no rows")

// Dataset is an opened, planned dataset with a position. Its methods are
// safe to call from several goroutines, but only one iteration runs at a time.
type Dataset struct {
	opts   Options
	data   *formats.Dataset
	chunks []split.Chunk
	planID string // hash of the chunk list: the plan fingerprint
	shared bool   // a consumer of StreamingSplit: data is its parent's to close
	// counts are the counting pass's rows of chunks the plan does not know
	// (EqualBatches), nil where none was needed.
	counts []int64

	mu      sync.Mutex
	running bool
	ep      *split.Epoch
	cursors []split.Cursor
	next    int
	// ahead holds the splits of the rank that are in a later epoch than
	// ep (a merged state's, see aheadCursor); nil where none is. Their
	// cursors in ep are at its end. With EqualBatches it holds every rank's
	// such splits, so that every rank counts the epochs they resume in alike.
	ahead map[int]aheadCursor
	// left is the batches this rank has left in the epoch with
	// EqualBatches, unused without (so that a Dataset made without the
	// option, such as a StreamingSplit consumer, needs no setting). every
	// holds every split's cursor where all ranks' positions are known (the
	// start of an epoch, a merged state), nil elsewhere: StreamingSplit
	// counts its consumers' batches from it.
	left  int64
	every []split.Cursor
	// kept holds the windows decoded for this epoch that the consumer has
	// not finished: an iteration that stops early leaves them for the next.
	kept keptWindows
	// skips holds decoded windows' bad rows until their split counts them
	// in skipped (skipped.go).
	skips   skipCounts
	skipped []int64
	// rand serves Take and Locate (take.go).
	rand taker
	// recycled is what shuffled windows are decoded into (recycle.go);
	// made on first need. noRecycle turns it off (tests compare).
	recycled  atomic.Pointer[recycler]
	noRecycle bool
	// recyclePermuted: shuffled windows are permuted into recycled
	// buffers too, the window's rows being the pipeline's alone after it
	// (a mix's lane: the mix copies every row it takes).
	recyclePermuted bool
	// decoding, where set, is shared with other pipelines (a mix's lanes):
	// a window's decode holds one of its slots while it runs, so that the
	// pipelines together decode no more windows at once than it has slots.
	decoding chan struct{}
}

// decodeAllocator is what windows are decoded into: recycled
// buffers where the window is permuted (its decoded buffers are the
// pipeline's alone), the user's allocator otherwise.
func (d *Dataset) decodeAllocator() memory.Allocator {
	if !d.opts.Shuffle || d.noRecycle {
		return d.opts.Allocator
	}
	if r := d.recycled.Load(); r != nil {
		return r
	}
	d.recycled.CompareAndSwap(nil, newRecycler(d.opts.Allocator))
	return d.recycled.Load()
}

// Open plans the dataset (every footer read once, concurrently) and checks
// the options. Unknown columns and NumSplits not divisible by WorldSize are
// errors here, not later. An empty dataset (files without rows, a table
// without a snapshot or data files) opens: it streams no rows and no
// batches, in every epoch, mode and rank; URLs that name no data file at
// all are an error wrapping formats.ErrEmpty, there being no schema.
func Open(ctx context.Context, opts Options) (*Dataset, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	d := &Dataset{opts: o}
	so := o.Storage
	userWrap := so.Wrap
	so.Wrap = func(b storage.Bucket) storage.Bucket {
		if userWrap != nil {
			b = userWrap(b)
		}
		c := storage.NewCounting(b)
		c.OnRead = func(_ string, _ int64, n int) { o.Metrics.AddRead(b.Scheme(), int64(n), 1) }
		return c
	}
	po := formats.PlanOptions{
		Columns:     o.Columns,
		Concurrency: o.PlanConcurrency,
		Storage:     so,
		Formats:     o.formats(),
		Cache:       o.PlanCache,
	}
	if o.Filter != "" {
		flt, err := filter.Parse(o.Filter)
		if err != nil {
			return nil, fmt.Errorf("stream: open: Options.Filter: %w", err)
		}
		po.Filter = flt
	}
	p, err := planDataset(ctx, o, po)
	if err != nil {
		return nil, err
	}
	d.data, d.chunks, d.planID = p.Data, p.Chunks, p.ID
	if o.EqualBatches && p.Data.Rows() < 0 {
		var flt string
		if po.Filter != nil {
			flt = po.Filter.String()
		}
		if d.counts, err = countRows(ctx, o, p.Data, p.Chunks, flt); err != nil {
			p.Data.Close()
			return nil, err
		}
	}
	if err := d.startEpoch(o.Epoch); err != nil {
		d.data.Close()
		return nil, err
	}
	return d, nil
}

// formats are the drivers tried: Parquet unless the options name some.
func (o Options) formats() []formats.Format {
	if len(o.Formats) == 0 {
		return []formats.Format{parquet.Format{}}
	}
	return o.Formats
}

// order is the dataset's order options.
func (o Options) order() permutation.Order {
	return permutation.Order{Shuffle: o.Shuffle, Seed: o.Seed, ClumpSize: o.ClumpSize, ShuffleWindow: o.ShuffleWindow, NumSplits: o.NumSplits, DropRemainder: o.DropRemainder}
}

// aheadCursor is a split's position in a later epoch than the dataset's.
// States taken at an epoch's boundary merge with each split in its own
// rank's epoch (checkpoint.State.Epochs): a rank that loads such a merge
// finishes the older epoch's splits first, while the splits already in a
// later one wait, and takes each up where it stands once its own epoch
// comes.
type aheadCursor struct {
	epoch  int64
	cursor split.Cursor
}

// startEpoch moves to epoch e with every cursor at its start.
func (d *Dataset) startEpoch(e int64) error {
	d.ahead = nil
	return d.enterEpoch(e)
}

// enterEpoch moves to epoch e: the splits d.ahead holds in e resume where
// they stand, those in later epochs wait at e's end, and the others start
// at e's start; with EqualBatches it counts the batches every rank takes.
// d.mu is held.
func (d *Dataset) enterEpoch(e int64) error {
	ep, err := d.newEpoch(e)
	if err != nil {
		return fmt.Errorf("stream: epoch %d: %w", e, err)
	}
	cursors := make([]split.Cursor, d.opts.NumSplits)
	for s, a := range d.ahead {
		if a.epoch == e {
			cursors[s] = a.cursor
			delete(d.ahead, s)
		} else {
			cursors[s] = ep.End(s)
		}
	}
	if len(d.ahead) == 0 {
		d.ahead = nil
	}
	d.moveTo(ep, cursors, 0)
	// Every rank enters an epoch with its splits that are not ahead at the
	// start (with EqualBatches, every rank finishes the last at one step),
	// and d.ahead holds every rank's that are: every cursor is known.
	return d.countEqual(slices.Clone(cursors))
}

// newEpoch is epoch e's order, with the counting pass's counts where there
// was one.
func (d *Dataset) newEpoch(e int64) (*split.Epoch, error) {
	ep, err := split.NewEpoch(d.chunks, d.opts.order(), e)
	if err == nil && d.counts != nil {
		err = ep.Count(d.counts)
	}
	return ep, err
}

// countEqual sets left from every split's cursors: the batches every rank
// takes with EqualBatches. d.mu is held, or d not yet shared.
func (d *Dataset) countEqual(every []split.Cursor) error {
	d.left, d.every = 0, nil
	if !d.opts.EqualBatches {
		return nil
	}
	n, err := d.ep.EqualBatches(d.opts.WorldSize, d.opts.BatchSize, every)
	if err != nil {
		return fmt.Errorf("stream: epoch %d: %w", d.ep.Epoch, err)
	}
	if n == 0 && d.opts.Rank == 0 {
		// A rank with nothing left makes every rank take nothing: say so
		// where the others have rows, which are then all dropped.
		for r := range d.opts.WorldSize {
			if d.ep.RankBatches(r, d.opts.WorldSize, d.opts.BatchSize, every) > 0 {
				d.opts.Logger.Warn("stream: EqualBatches: a rank has no batch left in this epoch, so no rank takes any; the rows the others have are dropped (fewer NumSplits, or smaller ChunkBytes, give every rank rows)",
					"epoch", d.ep.Epoch, "num_splits", d.opts.NumSplits, "world_size", d.opts.WorldSize, "chunks", len(d.chunks))
				break
			}
		}
	}
	d.left, d.every = n, every
	return nil
}

// moveTo sets the position; windows kept for another position go. d.mu is
// held.
func (d *Dataset) moveTo(ep *split.Epoch, cursors []split.Cursor, next int) {
	d.kept.drop()
	d.skips.reset()
	d.ep, d.cursors, d.next = ep, cursors, next
	d.opts.Metrics.SetUnscannedRows(d.unscanned())
	d.opts.Metrics.SetRefetchBytes(overlap(d.data.Fragments, ep, d.opts.Rank, d.opts.WorldSize).RankBytes)
}

// unscanned is the rows of this rank's splits not yet delivered this epoch
// (the metrics' "unscanned rows"); d.mu is held.
func (d *Dataset) unscanned() int64 {
	var n int64
	for _, s := range split.Owned(d.opts.NumSplits, d.opts.Rank, d.opts.WorldSize) {
		n += max(d.ep.Remaining(s, d.cursors[s]), 0)
	}
	return n
}

// Close releases the dataset's buckets and the windows read ahead. It does
// not stop a running iteration; cancel its context for that.
func (d *Dataset) Close() error {
	d.kept.drop()
	d.rand.cache.drop()
	if r := d.recycled.Load(); r != nil {
		r.release()
	}
	if d.shared { // a consumer of StreamingSplit: the files are its parent's
		return nil
	}
	return d.data.Close()
}

// Schema is the schema of every batch.
func (d *Dataset) Schema() *arrow.Schema { return d.data.Schema }

// Files returns the planned fragments (files) in plan order.
func (d *Dataset) Files() []*formats.Fragment { return d.data.Fragments }

// Chunks returns the chunk list the plan fingerprint covers.
func (d *Dataset) Chunks() []split.Chunk { return d.chunks }

// Splits returns the splits of the current epoch.
func (d *Dataset) Splits() []split.Split {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.ep.Splits
}

// Epoch is the epoch the next batch comes from.
func (d *Dataset) Epoch() int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.ep.Epoch
}

// Metrics returns the live figures of the dataset's pipeline.
func (d *Dataset) Metrics() *metrics.Pipeline { return d.opts.Metrics }

// Fingerprint is the plan fingerprint (a hash of files, sizes and chunks).
func (d *Dataset) Fingerprint() string { return d.planID }

// SetEpoch moves to the start of epoch e. It fails while iterating.
func (d *Dataset) SetEpoch(e int64) error {
	if e < 0 {
		return fmt.Errorf("stream: epoch %d must not be negative", e)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.running {
		return ErrBusy
	}
	return d.startEpoch(e)
}

// Batches streams the rest of the current epoch as Arrow record batches, in
// this rank's order. A batch is valid until the loop body returns: Retain it
// to keep it longer. When the epoch is exhausted the iteration ends and the
// dataset moves to the next epoch, so
//
//	for epoch := 0; epoch < n; epoch++ {
//		for batch, err := range ds.Batches(ctx) { ... }
//	}
//
// streams n epochs. Breaking out of the loop keeps the position: the next
// call goes on where it stopped. It also keeps what was read ahead: the
// break lets the fetches and decodes in flight finish (it returns once they
// have), and the next call of the same epoch starts from those windows
// instead of fetching them again. The first error ends the iteration.
func (d *Dataset) Batches(ctx context.Context) iter.Seq2[arrow.RecordBatch, error] {
	return func(yield func(arrow.RecordBatch, error) bool) {
		for out, err := range run(ctx, d, func(_ context.Context, b arrow.RecordBatch) (arrow.RecordBatch, error) {
			b.Retain()
			return b, nil
		}, func(b arrow.RecordBatch) { b.Release() }) {
			if err != nil {
				yield(nil, err)
				return
			}
			ok := yield(out, nil)
			out.Release()
			if !ok {
				return
			}
		}
	}
}

// Map streams the rest of the current epoch through fn, run on
// TransformConcurrency goroutines, and yields fn's results in exactly the
// order of Batches. fn owns nothing: the batch it gets is released after it
// returns (Retain what the result keeps). A panic in fn becomes an error
// naming the batch; the first error ends the iteration.
func Map[T any](ctx context.Context, d *Dataset, fn func(context.Context, arrow.RecordBatch) (T, error)) iter.Seq2[T, error] {
	return run(ctx, d, fn, nil)
}

// window is a decoded window: its rows as one or more record batches, and
// the order in which it emits them (nil: storage order).
type window struct {
	ref    split.WindowRef
	recs   []arrow.RecordBatch
	starts []int64 // starts[i] is the first row of recs[i]
	rows   int64
	order  []int32
	bytes  int64
	refs   refCount

	// whole is the window concatenated, made on first need by gathers of
	// column types without a fast path.
	once     sync.Once
	whole    arrow.RecordBatch
	wholeErr error
}

// refCount releases a window's records when the last batch cut from it,
// the cutter and the kept set are done with it.
type refCount struct {
	mu sync.Mutex
	n  int
}

func (w *window) retain() {
	w.refs.mu.Lock()
	w.refs.n++
	w.refs.mu.Unlock()
}

func (w *window) release() {
	w.refs.mu.Lock()
	w.refs.n--
	last := w.refs.n == 0
	w.refs.mu.Unlock()
	if last {
		for _, r := range w.recs {
			r.Release()
		}
		w.recs = nil
		if w.whole != nil {
			w.whole.Release()
		}
	}
}

// keptWindows holds one reference to each window of the epoch that was
// decoded and that the consumer has not finished. An iteration adds each
// window as it reaches the cutter and removes it once the consumer takes its
// last rows; what is left when an iteration stops early is what the next
// iteration starts from instead of fetching it again. Its size is bounded
// by what the pipeline holds in flight.
type keptWindows struct {
	mu sync.Mutex
	m  map[split.WindowRef]*window
}

// put keeps a reference to w.
func (k *keptWindows) put(w *window) {
	w.retain()
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.m == nil {
		k.m = map[split.WindowRef]*window{}
	}
	if old := k.m[w.ref]; old != nil {
		old.release()
	}
	k.m[w.ref] = w
}

// take removes the window r and hands over its reference, or returns nil.
func (k *keptWindows) take(r split.WindowRef) *window {
	k.mu.Lock()
	defer k.mu.Unlock()
	w := k.m[r]
	delete(k.m, r)
	return w
}

// done drops the reference to window r, if kept.
func (k *keptWindows) done(r split.WindowRef) {
	if w := k.take(r); w != nil {
		w.release()
	}
}

// refs lists the kept windows.
func (k *keptWindows) refs() map[split.WindowRef]bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := make(map[split.WindowRef]bool, len(k.m))
	for r := range k.m {
		out[r] = true
	}
	return out
}

// drop releases every kept window.
func (k *keptWindows) drop() {
	k.mu.Lock()
	m := k.m
	k.m = nil
	k.mu.Unlock()
	for _, w := range m {
		w.release()
	}
}

// job is a batch to build: its plan and the windows it cuts from.
type job struct {
	plan    split.Batch
	windows []*window // parallel to split.Parts
	// bytes is the batch's share of its windows' decoded bytes, by rows:
	// what it holds once built, whether a slice or a gather.
	bytes int64
}

func (j *job) release() {
	for _, w := range j.windows {
		if w != nil { // a job abandoned half-built holds only some
			w.release()
		}
	}
}

// result is a transformed batch and where taking it leaves the state.
type result[T any] struct {
	val  T
	plan split.Batch
	// bytes is the job's: the size of the batch the result was made of,
	// which the prefetch queue reports (a Map result's own size is the
	// user's type's to know).
	bytes int64
}

// readTask is one window for the read stages: fetched by the plan's task,
// or kept from an earlier iteration.
type readTask struct {
	ref   split.WindowRef
	fetch *engine.Task
	kept  *window
}

// groups holds the fetches of one iteration that windows share: a group
// is made by its first window and taken from by each of its pieces' windows.
type groups struct {
	mu sync.Mutex
	m  map[*engine.Group]*group
}

// group is a fetch in progress or done.
type group struct {
	done  chan struct{} // closed once whole or err is set
	whole *formats.Fetched
	err   error
	left  int // pieces not yet taken
}

func (gs *groups) get(g *engine.Group) *group {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	if gs.m == nil {
		gs.m = map[*engine.Group]*group{}
	}
	st := gs.m[g]
	if st == nil {
		st = &group{done: make(chan struct{}), left: g.Pieces}
		gs.m[g] = st
	}
	return st
}

// took records that one piece of g was taken; the group's bytes go with
// its last.
func (gs *groups) took(g *engine.Group) {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	if st := gs.m[g]; st != nil {
		if st.left--; st.left <= 0 {
			delete(gs.m, g)
		}
	}
}

// rowRates estimates the rows of windows whose count the plan does not
// know, from their stored bytes and the rows per byte of the windows of the
// same split decoded so far. The walk that orders reads needs an estimate:
// the cutter takes a split's windows as fast as their rows fill batches, and
// reads ordered for other rows than the windows hold would have the cutter
// hold windows it pulled past, beyond the prefetch bounds.
type rowRates struct {
	ep     *split.Epoch
	chunks []split.Chunk
	mu     sync.Mutex
	rows   map[int][2]int64 // per split: rows and bytes of decoded windows
}

func newRowRates(ep *split.Epoch, chunks []split.Chunk) *rowRates {
	return &rowRates{ep: ep, chunks: chunks, rows: map[int][2]int64{}}
}

// bytes is the stored bytes of window r's chunks.
func (rr *rowRates) bytes(r split.WindowRef) int64 {
	var n int64
	for _, p := range rr.ep.Pieces(r) {
		n += rr.chunks[p.Chunk].Bytes
	}
	return n
}

// learn records the rows a window of unknown count held.
func (rr *rowRates) learn(w *window) {
	if rr.ep.Windows[w.ref.Split][w.ref.Window].Rows >= 0 {
		return
	}
	b := rr.bytes(w.ref)
	rr.mu.Lock()
	defer rr.mu.Unlock()
	t := rr.rows[w.ref.Split]
	rr.rows[w.ref.Split] = [2]int64{t[0] + w.rows, t[1] + b}
}

// estimate guesses the rows of window r: by its split's rows per byte so
// far, or fallback before any is known.
func (rr *rowRates) estimate(r split.WindowRef, fallback int64) int64 {
	rr.mu.Lock()
	t := rr.rows[r.Split]
	rr.mu.Unlock()
	if t[1] <= 0 {
		return fallback
	}
	return max(rr.bytes(r)*t[0]/t[1], 0)
}

// run is the pipeline behind Batches and Map: a schedule of the rank's
// batches; a fetch stage and a decode stage that read windows in the order
// the schedule first needs them; a cutter that hands each batch its
// windows; a transform stage that builds each batch (slice or gather) and
// applies fn; and the consumer, whose taking of a batch is what moves the
// state.
//
// When the consumer stops early, the stages finish what they have started
// (no new fetch begins, but none in flight is thrown away) and the decoded
// windows the consumer has not finished stay in d.kept for the next
// iteration of the epoch.
func run[T any](ctx context.Context, d *Dataset, fn func(context.Context, arrow.RecordBatch) (T, error), releaseOut func(T)) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		var zero T
		d.mu.Lock()
		if d.running {
			d.mu.Unlock()
			yield(zero, ErrBusy)
			return
		}
		d.running = true
		ep, cursors, next, left := d.ep, slices.Clone(d.cursors), d.next, d.left
		equal := d.opts.EqualBatches
		kept := d.kept.refs()
		d.mu.Unlock()
		defer func() {
			d.mu.Lock()
			d.running = false
			d.mu.Unlock()
		}()

		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		o := d.opts
		m := o.Metrics
		m.SetCapacity(o.PrefetchWindows, o.PrefetchBatches)
		// The queues fill until the first batch and drain once every window
		// read is decoded: the diagnosis reads them in between.
		m.SetSteady(false)
		defer m.SetSteady(false)
		var fill fillState
		var stopping atomic.Bool // the consumer stopped early: finish, start nothing new
		var shared groups
		rates := newRowRates(ep, d.chunks)

		// Reads, in the order the schedule first needs each window: a kept
		// window as it is, the others with their fetch planned against the
		// windows read after them.
		reads := func(yield func(*readTask, error) bool) {
			s := split.NewSchedule(ep, o.Rank, o.WorldSize, o.BatchSize, cursors, next)
			if equal {
				s.Limit(left) // nothing past the rank's last batch is read
			}
			fp := engine.NewFetches(ep, d.chunks, o.FetchConcurrency)
			s.RowsOf = func(r split.WindowRef) int64 { return rates.estimate(r, int64(o.BatchSize)) }
			var pending, toFetch []split.WindowRef // read next, in order; those not kept
			more := true
			for {
				for more && len(toFetch) < fp.Ahead && !stopping.Load() {
					_, more = s.Step(func(r split.WindowRef) {
						pending = append(pending, r)
						if !kept[r] {
							toFetch = append(toFetch, r)
						}
					})
				}
				if len(pending) == 0 {
					fill.readsDone(m)
					return
				}
				r := pending[0]
				pending = pending[1:]
				t := &readTask{ref: r}
				switch stop := stopping.Load(); {
				case kept[r] && stop:
					continue // stays kept
				case kept[r]:
					if t.kept = d.kept.take(r); t.kept == nil {
						continue // dropped meanwhile: cannot happen while running
					}
				case stop && !fp.Claimed(r):
					// Nothing of r was fetched: leave it to the next
					// iteration.
					toFetch = toFetch[1:]
					continue
				case stop:
					// An earlier fetch holds some of r's bytes: read r so
					// that they are used, but join nothing more to it.
					t.fetch = fp.Plan(toFetch[:1])
					toFetch = toFetch[1:]
				default:
					t.fetch = fp.Plan(toFetch)
					toFetch = toFetch[1:]
				}
				fill.read()
				if !yield(t, nil) {
					return
				}
			}
		}
		// Fetching is I/O: many windows in flight hide storage latency.
		// Decoding is CPU: as many goroutines as cores.
		fetched := prefetch.Map(ctx, reads, prefetch.Stage[*readTask, *fetchedWindow]{
			Name:        "fetch",
			Concurrency: o.FetchConcurrency,
			Ahead:       o.FetchConcurrency,
			MaxBytes:    o.PrefetchBytes,
			Size:        func(f *fetchedWindow) int64 { return f.bytes },
			Fn: func(ctx context.Context, t *readTask) (*fetchedWindow, error) {
				if t.kept != nil {
					return &fetchedWindow{ref: t.ref, kept: t.kept}, nil
				}
				return d.fetchWindow(ctx, ep, t.fetch, &shared)
			},
			ReleaseIn: func(t *readTask) {
				if t.kept != nil {
					t.kept.release()
				}
			},
			ReleaseOut: func(f *fetchedWindow) {
				if f.kept != nil {
					f.kept.release()
				}
			},
			Hooks: prefetch.Hooks{
				Done: func(el time.Duration, _ int64) { m.AddFetch(el) },
			},
		})
		windows := prefetch.Map(ctx, fetched, prefetch.Stage[*fetchedWindow, *window]{
			Name:        "decode",
			Concurrency: o.ReadConcurrency,
			Ahead:       o.PrefetchWindows,
			MaxBytes:    o.PrefetchBytes,
			Size:        func(w *window) int64 { return w.bytes },
			Fn: func(ctx context.Context, f *fetchedWindow) (*window, error) {
				if f.kept != nil {
					w := f.kept
					f.kept = nil // handed on
					return w, nil
				}
				if d.decoding != nil {
					select {
					case d.decoding <- struct{}{}:
						defer func() { <-d.decoding }()
					case <-ctx.Done():
						return nil, ctx.Err()
					}
				}
				w, err := d.decodeWindow(ctx, ep, f)
				if err == nil {
					rates.learn(w)
				}
				return w, err
			},
			ReleaseIn: func(f *fetchedWindow) {
				if f.kept != nil {
					f.kept.release()
				}
			},
			ReleaseOut: func(w *window) { w.release() },
			Hooks: prefetch.Hooks{
				Done: func(el time.Duration, _ int64) {
					m.AddFetch(el)
					fill.decoded(m)
				},
				Queue: func(n int, b int64) { m.SetRawQueue(n, b) },
			},
		})

		// The cutter: walk the schedule again, pairing each batch with its
		// windows as the read stage delivers them. Every window it receives
		// is kept until the consumer finishes it.
		jobs := func(yield func(*job, error) bool) {
			nextWindow, stopReads := iter.Pull2(windows)
			defer stopReads()
			held := map[split.WindowRef]*window{}
			defer func() {
				for _, w := range held {
					w.release()
				}
			}()
			var readErr error
			pull := func() bool {
				got, err, more := nextWindow()
				if err != nil || !more {
					readErr = err
					return false
				}
				d.kept.put(got)
				held[got.ref] = got
				return true
			}
			await := func(r split.WindowRef) *window {
				for held[r] == nil && readErr == nil && pull() {
				}
				return held[r]
			}
			s := split.NewSchedule(ep, o.Rank, o.WorldSize, o.BatchSize, cursors, next)
			if equal {
				s.Limit(left)
			}
			s.RowsOf = func(r split.WindowRef) int64 {
				if w := await(r); w != nil {
					return w.rows
				}
				return 0 // the read failed: readErr ends the walk below
			}
			for {
				if stopping.Load() {
					// Take in what the read stages finish, for the next
					// iteration.
					for pull() {
					}
					return
				}
				bp, ok := s.Step(nil)
				if !ok {
					return
				}
				j := &job{plan: bp, windows: make([]*window, len(bp.Parts))}
				for i, p := range bp.Parts {
					w := await(p.Ref)
					if w == nil && stopping.Load() {
						// The reads ended early for the next iteration.
						j.release()
						for pull() {
						}
						return
					}
					if w == nil {
						j.release()
						if readErr == nil {
							readErr = fmt.Errorf("stream: internal error: window %v of split %d was never read", p.Ref.Window, p.Ref.Split)
						}
						yield(nil, readErr)
						return
					}
					w.retain()
					j.windows[i] = w
					if w.rows > 0 {
						// A slice's buffers are its window's: the batch's
						// share is counted, not theirs.
						j.bytes += w.bytes * (p.To - p.From) / w.rows
					}
					if p.Last {
						delete(held, p.Ref)
						w.release() // the cutter's own hold
					}
				}
				if readErr != nil {
					j.release()
					yield(nil, readErr)
					return
				}
				if bp.Rows == 0 {
					// Only windows that turned out empty: nothing to hand
					// on (a resumed walk finds the same).
					j.release()
					continue
				}
				// A job handed to the stage is the stage's, even when it is
				// stopping: it releases what it never ran (ReleaseIn).
				if !yield(j, nil) {
					return
				}
			}
		}

		results := prefetch.Map(ctx, jobs, prefetch.Stage[*job, result[T]]{
			Name:        "transform",
			Concurrency: o.TransformConcurrency,
			Ahead:       o.PrefetchBatches,
			Size:        func(r result[T]) int64 { return r.bytes },
			Fn: func(ctx context.Context, j *job) (result[T], error) {
				v, err := transform(ctx, d, ep, j, fn)
				return result[T]{val: v, plan: j.plan, bytes: j.bytes}, err
			},
			ReleaseIn: func(j *job) { j.release() },
			ReleaseOut: func(r result[T]) {
				if releaseOut != nil {
					releaseOut(r.val)
				}
			},
			Hooks: prefetch.Hooks{
				Done:  func(el time.Duration, _ int64) { m.AddTransform(el) },
				Queue: func(n int, b int64) { m.SetPrefetchQueue(n, b) },
				Wait:  fill.wait(m),
			},
		})

		for r, err := range results {
			if err != nil {
				if stopping.Load() {
					// The consumer has gone: a failure now only costs the
					// next iteration a read.
					break
				}
				d.kept.drop()
				// The stages' own errors already name the epoch, split and
				// window or batch; the pipeline's item numbers mean nothing
				// to a user.
				var ie *prefetch.ItemError
				for errors.As(err, &ie) {
					err = ie.Err
				}
				if ctx.Err() != nil && errors.Is(err, context.Canceled) {
					err = fmt.Errorf("stream: epoch %d: %w", ep.Epoch, err)
				}
				cancel()
				yield(zero, err)
				return
			}
			if stopping.Load() {
				if releaseOut != nil {
					releaseOut(r.val)
				}
				continue
			}
			// Taking the batch is what moves the state: a state taken in the
			// loop body resumes after this batch.
			d.mu.Lock()
			skipped := d.finish(r.plan.Split, r.plan.After.Window)
			d.cursors[r.plan.Split] = r.plan.After
			d.next = r.plan.Next
			d.every = nil // other ranks' cursors moved too, unseen
			if equal && d.left > 0 {
				d.left--
			}
			d.mu.Unlock()
			for _, p := range r.plan.Parts {
				if p.Last {
					d.kept.done(p.Ref)
				}
			}
			m.AddConsumed(r.plan.Rows, 1)
			m.AddSkipped(skipped)
			m.SetUnscannedRows(d.unscannedNow())
			if !yield(r.val, nil) {
				// Let the stages finish what they started, so that the next
				// iteration finds it decoded instead of fetching it again.
				stopping.Store(true)
			}
		}
		if stopping.Load() {
			return
		}
		if ctx.Err() != nil {
			d.kept.drop()
			yield(zero, ctx.Err())
			return
		}
		d.mu.Lock()
		m.AddSkipped(d.finishEpoch())
		err := d.enterEpoch(ep.Epoch + 1)
		d.mu.Unlock()
		if err != nil {
			yield(zero, err)
		}
	}
}

// fillState follows an iteration's queues filling and draining, for
// metrics.Pipeline.SetSteady and AddStartWait.
type fillState struct {
	mu                  sync.Mutex
	reads, decodes      int
	allRead, allDecoded bool
	started             atomic.Bool
}

// read counts a window handed to the fetch stage.
func (f *fillState) read() {
	f.mu.Lock()
	f.reads++
	f.mu.Unlock()
}

// readsDone says every window the iteration reads was handed on.
func (f *fillState) readsDone(m *metrics.Pipeline) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.allRead = true
	f.drained(m)
}

// decoded counts a window the decode stage finished.
func (f *fillState) decoded(m *metrics.Pipeline) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.decodes++
	f.drained(m)
}

// drained ends the steady state once every window read is decoded: the
// raw queue can then only empty, and the prefetch queue after it. f.mu is
// held, so the end is reported once, after the start it may race with.
func (f *fillState) drained(m *metrics.Pipeline) {
	if f.allRead && f.decodes >= f.reads && !f.allDecoded {
		f.allDecoded = true
		m.SetSteady(false)
	}
}

// wait is the consumer's Wait hook: its first wait is the iteration's
// start, after which the queues are steady until drained.
func (f *fillState) wait(m *metrics.Pipeline) func(time.Duration) {
	return func(w time.Duration) {
		if f.started.Swap(true) {
			m.AddConsumerWait(w)
			return
		}
		m.AddStartWait(w)
		f.mu.Lock()
		defer f.mu.Unlock()
		if !f.allDecoded {
			m.SetSteady(true)
		}
	}
}

// unscannedNow is unscanned under the dataset's lock.
func (d *Dataset) unscannedNow() int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.unscanned()
}

// transform builds one batch from its windows and applies fn.
func transform[T any](ctx context.Context, d *Dataset, ep *split.Epoch, j *job, fn func(context.Context, arrow.RecordBatch) (T, error)) (out T, err error) {
	b, err := func() (arrow.RecordBatch, error) {
		defer j.release() // also if build panics: the stage reports the panic
		return build(ctx, d.data.Schema, j, d.opts.Allocator)
	}()
	if err != nil {
		return out, fmt.Errorf("%w (stream: epoch %d, split %d, batch %d)", err, ep.Epoch, j.plan.Split, j.plan.Seq)
	}
	defer b.Release()
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("stream: epoch %d split %d batch %d: transform panicked: %v", ep.Epoch, j.plan.Split, j.plan.Seq, p)
		}
	}()
	out, err = fn(ctx, b)
	if err != nil {
		return out, fmt.Errorf("transform: %w (stream: epoch %d, split %d, batch %d)", err, ep.Epoch, j.plan.Split, j.plan.Seq)
	}
	return out, nil
}

// fetchedWindow is a window whose stored bytes are in memory, or a window
// kept decoded from an earlier iteration.
type fetchedWindow struct {
	ref    split.WindowRef
	pieces []*formats.Fetched // in window order
	bytes  int64
	kept   *window
}

// fetchWindow makes the fetches a window's task owns, concurrently, then
// takes each of its pieces from its group, waiting for groups that an
// earlier window's fetch makes.
func (d *Dataset) fetchWindow(ctx context.Context, ep *split.Epoch, t *engine.Task, shared *groups) (*fetchedWindow, error) {
	r := t.Ref
	wrap := func(err error) error {
		return fmt.Errorf("%w (stream: epoch %d, split %d, window %d)", err, ep.Epoch, r.Split, r.Window)
	}
	g, gctx := errgroup.WithContext(ctx)
	for _, pg := range t.Owned {
		st := shared.get(pg)
		g.Go(func() error {
			defer close(st.done)
			st.whole, st.err = d.data.Fetch(gctx, pg.Range.Fragment, rangeOf(pg.Range))
			return st.err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, wrap(err)
	}
	pieces := ep.Pieces(r)
	f := &fetchedWindow{ref: r, pieces: make([]*formats.Fetched, len(pieces))}
	for i, p := range pieces {
		pg := t.Pieces[i]
		st := shared.get(pg)
		select {
		case <-st.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if st.err != nil {
			return nil, wrap(st.err)
		}
		part, err := st.whole.Part(rangeOf(p))
		if err != nil {
			return nil, wrap(err)
		}
		f.pieces[i] = part
		f.bytes += pg.Share(p, st.whole.Bytes)
		shared.took(pg)
	}
	return f, nil
}

// rangeOf is what a piece reads of its file.
func rangeOf(p split.Piece) formats.Range {
	return formats.Range{Start: p.Start, End: p.End, FirstUnit: p.FirstUnit, EndUnit: p.EndUnit}
}

// decodeWindow decodes a fetched window and computes its row order.
func (d *Dataset) decodeWindow(ctx context.Context, ep *split.Epoch, f *fetchedWindow) (*window, error) {
	r := f.ref
	wd := ep.Windows[r.Split][r.Window]
	w := &window{ref: r}
	w.refs.n = 1
	segments := make([]int64, 0, len(f.pieces))
	var skipped int64
	mem := d.decodeAllocator()
	for _, p := range f.pieces {
		before := w.rows
		bad, err := d.data.ReadFetchedSkips(ctx, p, d.opts.ReadBatchSize, mem, func(b arrow.RecordBatch) error {
			w.recs = append(w.recs, b)
			w.starts = append(w.starts, w.rows)
			w.rows += b.NumRows()
			w.bytes += recordBytes(b)
			return nil
		})
		if err != nil {
			w.release()
			return nil, fmt.Errorf("%w (stream: epoch %d, split %d, window %d)", err, ep.Epoch, r.Split, r.Window)
		}
		skipped += bad
		segments = append(segments, w.rows-before)
	}
	if wd.Rows >= 0 && w.rows != wd.Rows {
		w.release()
		return nil, fmt.Errorf("stream: epoch %d split %d window %d: read %d rows, the plan has %d: %w", ep.Epoch, r.Split, r.Window, w.rows, wd.Rows, formats.ErrCorrupt)
	}
	if w.rows > math.MaxInt32 {
		w.release()
		return nil, fmt.Errorf("stream: epoch %d split %d window %d: %d rows is more than a window can order (ShuffleWindow bounds it where counts are known)", ep.Epoch, r.Split, r.Window, w.rows)
	}
	if order := ep.RowOrder(r, segments); order != nil && w.rows > 0 {
		// A window the filter emptied has nothing to put in order (and no
		// batch to concatenate for the gathers that work on one).
		out := d.opts.Allocator
		if rc, ok := mem.(*recycler); ok {
			// A round of decoders, each with a window's decoded buffers,
			// pages and scratch: what the next round reuses.
			n := 2 * int64(d.opts.ReadConcurrency)
			if d.recyclePermuted {
				// And the permuted windows: those read ahead, and the
				// one being taken.
				n += int64(d.opts.PrefetchWindows) + 1
				out = rc
				if gathersFast(d.data.Schema) {
					out = unzeroed{rc}
				}
			}
			rc.fit(n * w.bytes)
		}
		if err := w.permute(ctx, d.data.Schema, order, out); err != nil {
			w.release()
			return nil, fmt.Errorf("%w (stream: epoch %d, split %d, window %d)", err, ep.Epoch, r.Split, r.Window)
		}
	}
	d.skips.record(r, skipped)
	return w, nil
}

// permute puts a decoded window's rows in its shuffled order, once, column by
// column, so that its batches are slices of it as in storage order.
//
// Gathering each batch from the window instead reads every column of the
// window at random for each batch: a window larger than the core's cache
// (a 131,072-row group of five columns is 7 MB) then pays a cache miss for
// nearly every value. One column at a time, the column's values stay in
// cache for the whole pass (1 MB for 131,072 int64s), and the gathers run
// on the decode goroutines, beside the decoding that made the window.
func (w *window) permute(ctx context.Context, schema *arrow.Schema, order []int32, mem memory.Allocator) error {
	w.order = order
	rec, err := gatherBy(ctx, schema, newPermutePlan(w, order), mem)
	if err != nil {
		return err
	}
	for _, r := range w.recs {
		r.Release()
	}
	if w.whole != nil {
		w.whole.Release()
		w.whole = nil
	}
	w.recs, w.starts, w.order = []arrow.RecordBatch{rec}, []int64{0}, nil
	w.bytes = recordBytes(rec)
	return nil
}

// recordBytes is the memory held by a batch's buffers.
func recordBytes(b arrow.RecordBatch) int64 {
	var n int64
	for _, c := range b.Columns() {
		n += formats.DataBytes(c.Data())
	}
	return n
}
