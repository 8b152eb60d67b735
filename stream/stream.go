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
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"iter"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"golang.org/x/sync/errgroup"

	"github.com/sluicedata/sluice/checkpoint"
	"github.com/sluicedata/sluice/formats"
	"github.com/sluicedata/sluice/formats/storage"
	"github.com/sluicedata/sluice/metrics"
	"github.com/sluicedata/sluice/prefetch"
	"github.com/sluicedata/sluice/split"
)

// ErrBusy is returned when a second iteration is started on a Dataset while
// one is running: a dataset has one position, so one consumer.
var ErrBusy = errors.New("stream: an iteration is already running on this dataset")

// chunksPerWindow is the fewest chunks a full shuffle window is made of.
const chunksPerWindow = 16

// ErrEmpty is wrapped when the URLs hold no rows.
var ErrEmpty = errors.New("stream: dataset has no rows")

// Dataset is an opened, planned dataset with a position. Its methods are
// safe to call from several goroutines, but only one iteration runs at a time.
type Dataset struct {
	opts   Options
	data   *formats.Dataset
	chunks []split.Chunk
	plan   string // hash of the chunk list: the plan fingerprint
	reads  *storage.Counting

	mu      sync.Mutex
	running bool
	ep      *epochPlan
	cursors []checkpoint.Cursor
	next    int
}

// Open plans the dataset (every footer read once, concurrently) and checks
// the options. Unknown columns, an empty dataset and NumSplits not divisible
// by WorldSize are errors here, not later.
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
	data, err := formats.Plan(ctx, o.URLs, formats.PlanOptions{
		Columns:     o.Columns,
		Concurrency: o.PlanConcurrency,
		Storage:     so,
		Formats:     o.Formats,
		Cache:       o.PlanCache,
	})
	if err != nil {
		return nil, fmt.Errorf("stream: open: %w", err)
	}
	d.data = data
	if data.Rows() == 0 {
		data.Close()
		return nil, fmt.Errorf("%w: %d files, 0 rows", ErrEmpty, len(data.Fragments))
	}
	// Chunks hold at most a sixteenth of a window, so that a shuffled
	// window mixes rows from at least sixteen places of the dataset (where
	// row groups are that small: they are never cut).
	d.chunks = split.Chunks(data.Fragments, split.ChunkOptions{TargetBytes: o.ChunkBytes, MaxRows: max(int64(o.ShuffleWindow)/chunksPerWindow, 1)})
	d.plan = planHash(data, d.chunks)
	if err := d.startEpoch(o.Epoch); err != nil {
		data.Close()
		return nil, err
	}
	return d, nil
}

// planHash fingerprints the chunk list by relative keys, sizes and row
// ranges, so a dataset copied to another place or bucket is the same plan.
func planHash(data *formats.Dataset, chunks []split.Chunk) string {
	h := sha256.New()
	for _, f := range data.Fragments {
		fmt.Fprintf(h, "f %q %d %d\n", f.Rel, f.Size, f.Rows)
	}
	for _, c := range chunks {
		fmt.Fprintf(h, "c %d %d %d\n", c.Fragment, c.Start, c.End)
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// startEpoch moves to epoch e with every cursor at its start.
func (d *Dataset) startEpoch(e int64) error {
	ep, err := newEpochPlan(d.chunks, d.opts, e)
	if err != nil {
		return fmt.Errorf("stream: epoch %d: %w", e, err)
	}
	d.ep = ep
	d.cursors = make([]checkpoint.Cursor, d.opts.NumSplits)
	d.next = 0
	d.opts.Metrics.SetUnscannedRows(d.unscanned())
	return nil
}

// unscanned is the rows of this rank's splits not yet delivered this epoch
// (the metrics' "unscanned rows"); d.mu is held.
func (d *Dataset) unscanned() int64 {
	var n int64
	for s := d.opts.Rank; s < d.opts.NumSplits; s += d.opts.WorldSize {
		n += d.ep.splits[s].Rows - d.cursors[s].Rows
	}
	return n
}

// Close releases the dataset's buckets. It does not stop a running
// iteration; cancel its context for that.
func (d *Dataset) Close() error { return d.data.Close() }

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
	return d.ep.splits
}

// Epoch is the epoch the next batch comes from.
func (d *Dataset) Epoch() int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.ep.epoch
}

// Metrics returns the live figures of the dataset's pipeline.
func (d *Dataset) Metrics() *metrics.Pipeline { return d.opts.Metrics }

// Fingerprint is the plan fingerprint (a hash of files, sizes and chunks).
func (d *Dataset) Fingerprint() string { return d.plan }

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
// call goes on where it stopped. The first error ends the iteration.
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
	ref    windowRef
	recs   []arrow.RecordBatch
	starts []int64 // starts[i] is the first row of recs[i]
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
// and the cutter, are done with it.
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

// job is a batch to build: its plan and the windows it cuts from.
type job struct {
	plan    batchPlan
	windows []*window // parallel to plan.parts
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
	plan batchPlan
}

// run is the pipeline behind Batches and Map: a schedule of the rank's
// batches; a read stage that decodes windows in the order the schedule first
// needs them; a cutter that hands each batch its windows; a transform stage
// that builds each batch (slice or gather) and applies fn; and the
// consumer, whose taking of a batch is what moves the state.
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
		ep, cursors, next := d.ep, append([]checkpoint.Cursor(nil), d.cursors...), d.next
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

		// Reads, in the order the schedule first needs each window, each
		// with its fetch planned against the windows read after it.
		reads := func(yield func(*fetchTask, error) bool) {
			s := newSchedule(ep, o, cursors, next)
			planner := newFetchPlanner(ep, d.chunks, o.FetchConcurrency)
			var order []windowRef // read next, in order
			more := true
			for {
				for more && len(order) < planner.ahead {
					_, more = s.step(func(r windowRef) { order = append(order, r) })
				}
				if len(order) == 0 {
					return
				}
				if !yield(planner.plan(order), nil) {
					return
				}
				order = order[1:]
			}
		}
		// Fetching is I/O: many windows in flight hide storage latency.
		// Decoding is CPU: as many goroutines as cores.
		fetched := prefetch.Map(ctx, reads, prefetch.Stage[*fetchTask, *fetchedWindow]{
			Name:        "fetch",
			Concurrency: o.FetchConcurrency,
			Ahead:       o.FetchConcurrency,
			MaxBytes:    o.PrefetchBytes,
			Size:        func(f *fetchedWindow) int64 { return f.bytes },
			Fn:          func(ctx context.Context, t *fetchTask) (*fetchedWindow, error) { return d.fetchWindow(ctx, ep, t) },
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
			Fn:          func(ctx context.Context, f *fetchedWindow) (*window, error) { return d.decodeWindow(ctx, ep, f) },
			ReleaseOut:  func(w *window) { w.release() },
			Hooks: prefetch.Hooks{
				Done:  func(el time.Duration, _ int64) { m.AddFetch(el) },
				Queue: func(n int, b int64) { m.SetRawQueue(n, b) },
			},
		})

		// The cutter: walk the schedule again, pairing each batch with its
		// windows as the read stage delivers them.
		jobs := func(yield func(*job, error) bool) {
			nextWindow, stopReads := iter.Pull2(windows)
			defer stopReads()
			held := map[windowRef]*window{}
			defer func() {
				for _, w := range held {
					w.release()
				}
			}()
			s := newSchedule(ep, o, cursors, next)
			for {
				bp, ok := s.step(nil)
				if !ok {
					return
				}
				j := &job{plan: bp, windows: make([]*window, len(bp.parts))}
				for i, p := range bp.parts {
					w, ok := held[p.ref]
					for !ok {
						got, err, more := nextWindow()
						if err != nil {
							j.release()
							yield(nil, err)
							return
						}
						if !more {
							j.release()
							yield(nil, fmt.Errorf("stream: internal error: window %v of split %d was never read", p.ref.window, p.ref.split))
							return
						}
						held[got.ref] = got
						w, ok = held[p.ref]
					}
					w.retain()
					j.windows[i] = w
					if p.last {
						delete(held, p.ref)
						w.release() // the cutter's own hold
					}
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
			Fn: func(ctx context.Context, j *job) (result[T], error) {
				v, err := transform(ctx, d, ep, j, fn)
				return result[T]{val: v, plan: j.plan}, err
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
				Wait:  func(w time.Duration) { m.AddConsumerWait(w) },
			},
		})

		for r, err := range results {
			if err != nil {
				// The stages' own errors already name the epoch, split and
				// window or batch; the pipeline's item numbers mean nothing
				// to a user.
				var ie *prefetch.ItemError
				for errors.As(err, &ie) {
					err = ie.Err
				}
				if ctx.Err() != nil && errors.Is(err, context.Canceled) {
					err = fmt.Errorf("stream: epoch %d: %w", ep.epoch, err)
				}
				cancel()
				yield(zero, err)
				return
			}
			// Taking the batch is what moves the state: a state taken in the
			// loop body resumes after this batch.
			d.mu.Lock()
			d.cursors[r.plan.split] = r.plan.after
			d.next = r.plan.next
			d.mu.Unlock()
			m.AddConsumed(r.plan.rows, 1)
			m.SetUnscannedRows(d.unscannedNow())
			if !yield(r.val, nil) {
				// Cancel before the stages shut down, so reads in flight
				// stop now instead of finishing first.
				cancel()
				return
			}
		}
		if ctx.Err() != nil {
			yield(zero, ctx.Err())
			return
		}
		d.mu.Lock()
		err := d.startEpoch(ep.epoch + 1)
		d.mu.Unlock()
		if err != nil {
			yield(zero, err)
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
func transform[T any](ctx context.Context, d *Dataset, ep *epochPlan, j *job, fn func(context.Context, arrow.RecordBatch) (T, error)) (out T, err error) {
	b, err := build(ctx, d.data.Schema, j, d.opts.Allocator)
	j.release()
	if err != nil {
		return out, fmt.Errorf("stream: epoch %d split %d batch %d: %w", ep.epoch, j.plan.split, j.plan.seq, err)
	}
	defer b.Release()
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("stream: epoch %d split %d batch %d: transform panicked: %v", ep.epoch, j.plan.split, j.plan.seq, p)
		}
	}()
	out, err = fn(ctx, b)
	if err != nil {
		return out, fmt.Errorf("stream: epoch %d split %d batch %d: transform: %w", ep.epoch, j.plan.split, j.plan.seq, err)
	}
	return out, nil
}

// fetchedWindow is a window whose stored bytes are in memory.
type fetchedWindow struct {
	ref    windowRef
	pieces []*formats.Fetched // in window order
	bytes  int64
}

// fetchWindow makes the fetches a window's task owns, concurrently, then
// takes each of its pieces from its group, waiting for groups that an
// earlier window's fetch makes.
func (d *Dataset) fetchWindow(ctx context.Context, ep *epochPlan, t *fetchTask) (*fetchedWindow, error) {
	r := t.ref
	wrap := func(err error) error {
		return fmt.Errorf("stream: epoch %d split %d window %d: %w", ep.epoch, r.split, r.window, err)
	}
	g, gctx := errgroup.WithContext(ctx)
	for _, fg := range t.owned {
		g.Go(func() error {
			defer close(fg.done)
			fg.whole, fg.err = d.data.Fetch(gctx, fg.frag, fg.start, fg.end)
			return fg.err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, wrap(err)
	}
	sp := ep.splits[r.split]
	wd := ep.windows[r.split][r.window]
	pieces := sp.Pieces[wd.First:wd.End]
	f := &fetchedWindow{ref: r, pieces: make([]*formats.Fetched, len(pieces))}
	for i, p := range pieces {
		fg := t.pieces[i]
		select {
		case <-fg.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if fg.err != nil {
			return nil, wrap(fg.err)
		}
		part, err := fg.whole.Part(p.Start, p.End)
		if err != nil {
			return nil, wrap(err)
		}
		f.pieces[i] = part
		f.bytes += fg.share(p)
	}
	return f, nil
}

// decodeWindow decodes a fetched window and computes its row order.
func (d *Dataset) decodeWindow(ctx context.Context, ep *epochPlan, f *fetchedWindow) (*window, error) {
	r := f.ref
	wd := ep.windows[r.split][r.window]
	w := &window{ref: r}
	w.refs.n = 1
	segments := make([]int64, 0, len(f.pieces))
	var rows int64
	for _, p := range f.pieces {
		before := rows
		err := d.data.ReadFetched(ctx, p, d.opts.ReadBatchSize, d.opts.Allocator, func(b arrow.RecordBatch) error {
			w.recs = append(w.recs, b)
			w.starts = append(w.starts, rows)
			rows += b.NumRows()
			w.bytes += recordBytes(b)
			return nil
		})
		if err != nil {
			w.release()
			return nil, fmt.Errorf("stream: epoch %d split %d window %d: %w", ep.epoch, r.split, r.window, err)
		}
		segments = append(segments, rows-before)
	}
	if rows != wd.Rows {
		w.release()
		return nil, fmt.Errorf("stream: epoch %d split %d window %d: read %d rows, the plan has %d: %w", ep.epoch, r.split, r.window, rows, wd.Rows, formats.ErrCorrupt)
	}
	w.order = permOrder(d.opts, ep.epoch, segments, r)
	return w, nil
}

// recordBytes is the memory held by a batch's buffers.
func recordBytes(b arrow.RecordBatch) int64 {
	var n int64
	for _, c := range b.Columns() {
		n += dataBytes(c.Data())
	}
	return n
}

func dataBytes(d arrow.ArrayData) int64 {
	var n int64
	for _, b := range d.Buffers() {
		if b != nil {
			n += int64(b.Len())
		}
	}
	for _, c := range d.Children() {
		n += dataBytes(c)
	}
	return n
}
