package engine

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/sluicedata/sluice/metrics"
	"github.com/sluicedata/sluice/prefetch"
	"github.com/sluicedata/sluice/split"
)

// Run is the pipeline behind Batches and Map: a schedule of the rank's
// batches; a fetch stage and a decode stage (which permutes shuffled
// windows) that read windows in the order the schedule first needs them;
// a cut stage that hands each batch its windows; a transform stage that
// builds each batch (slice or gather) and applies fn; and the consumer,
// whose taking of a batch is what moves the position. releaseOut, if set,
// releases a result of fn that is never handed to the consumer.
//
// When the consumer stops early, the stages finish what they have started
// (no new fetch begins, but none in flight is thrown away) and the decoded
// windows the consumer has not finished stay kept for the next iteration
// of the epoch. When it takes the epoch's last batch, the engine moves to
// the next epoch.
func Run[T any](ctx context.Context, e *Engine, fn func(context.Context, arrow.RecordBatch) (T, error), releaseOut func(T)) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		var zero T
		it, err := e.begin()
		if err != nil {
			yield(zero, err)
			return
		}
		defer e.end()
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		it.m.SetCapacity(it.o.Limits.PrefetchWindows, it.o.Limits.PrefetchBatches)
		// The queues fill until the first batch and drain once every window
		// read is decoded: the diagnosis reads them in between.
		it.m.SetSteady(false)
		defer it.m.SetSteady(false)

		windows := it.decodeStage(ctx, it.taken(it.fetchStage(ctx, it.reads(ctx))))
		results := transformStage(ctx, it, it.cut(windows), fn, releaseOut)
		if !deliver(ctx, cancel, it, results, yield, releaseOut) {
			return
		}
		if err := e.nextEpoch(it.ep); err != nil {
			yield(zero, err)
		}
	}
}

// Batches is Run yielding the record batches themselves: a batch is valid
// until the loop body returns (stream.Dataset.Batches).
func (e *Engine) Batches(ctx context.Context) iter.Seq2[arrow.RecordBatch, error] {
	return func(yield func(arrow.RecordBatch, error) bool) {
		for out, err := range Run(ctx, e, func(_ context.Context, b arrow.RecordBatch) (arrow.RecordBatch, error) {
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

// iteration is one run of the pipeline over the rest of an epoch: the
// position it starts from, and what its stages share.
type iteration struct {
	e       *Engine
	o       Options
	m       *metrics.Pipeline
	ep      *split.Epoch
	cursors []split.Cursor
	next    int
	left    int64
	// kept is the windows an earlier iteration left decoded.
	kept map[split.WindowRef]bool
	fill fillState
	// stopping: the consumer stopped early; the stages finish what they
	// started and start nothing new.
	stopping atomic.Bool
	shared   groups
	rates    *rowRates
}

// begin marks the engine running and takes the position an iteration
// starts from, or returns ErrBusy.
func (e *Engine) begin() (*iteration, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.running {
		return nil, ErrBusy
	}
	e.running = true
	it := &iteration{e: e, o: e.opts, m: e.opts.Metrics, ep: e.ep, cursors: slices.Clone(e.cursors), next: e.next, left: e.left, kept: e.kept.refs()}
	it.rates = newRowRates(it.ep, e.chunks)
	e.depth.begin()
	return it, nil
}

// end marks the engine no longer running.
func (e *Engine) end() {
	e.mu.Lock()
	e.running = false
	e.mu.Unlock()
}

// schedule is the rank's batches from the iteration's position: the reads
// walk it to order the fetches, the cut stage to cut the batches.
func (it *iteration) schedule() *split.Schedule {
	s := split.NewSchedule(it.ep, it.o.Rank, it.o.WorldSize, it.o.BatchSize, it.cursors, it.next)
	if it.o.EqualBatches {
		s.Limit(it.left) // nothing past the rank's last batch is read
	}
	return s
}

// reads are the windows the fetch stage reads, in the order the schedule
// first needs each: a kept window as it is, the others with their fetch
// planned against the windows read after them, so that neighbouring
// pieces of a file go out as one request. Once the consumer has stopped
// it plans no new fetch, but reads what an earlier fetch holds bytes of.
// A window goes on to the fetch stage once the bytes its fetch brings fit
// what the stage may hold ahead of the decoders (ahead.go).
func (it *iteration) reads(ctx context.Context) iter.Seq2[*readTask, error] {
	return func(yield func(*readTask, error) bool) { it.walkReads(ctx, yield) }
}

func (it *iteration) walkReads(ctx context.Context, yield func(*readTask, error) bool) {
	s := it.schedule()
	fp := NewFetches(it.ep, it.e.chunks, it.o.Limits.joinAhead())
	fp.UnitJoinBytes = it.e.placeBytes
	fp.Ramp = it.o.Limits.ReadConcurrency
	fp.Skip = func(r split.WindowRef) bool { return it.kept[r] }
	s.RowsOf = func(r split.WindowRef) int64 { return it.rates.estimate(r, int64(it.o.BatchSize)) }
	var pending, toFetch []split.WindowRef // read next, in order; those not kept
	more := true
	for {
		for more && len(toFetch) < fp.Ahead && !it.stopping.Load() {
			_, more = s.Step(func(r split.WindowRef) {
				pending = append(pending, r)
				if !it.kept[r] {
					toFetch = append(toFetch, r)
				}
			})
		}
		if len(pending) == 0 {
			it.fill.readsDone(it.m)
			return
		}
		r := pending[0]
		pending = pending[1:]
		t := &readTask{ref: r}
		switch stop := it.stopping.Load(); {
		case it.kept[r] && stop:
			continue // stays kept
		case it.kept[r]:
			if t.kept = it.e.kept.take(r); t.kept == nil {
				continue // dropped meanwhile: cannot happen while running
			}
		case stop && !fp.Claimed(r):
			// Nothing of r was fetched: leave it to the next iteration.
			toFetch = toFetch[1:]
			continue
		case stop:
			// An earlier fetch holds some of r's bytes: read r so that
			// they are used, but join nothing more to it.
			t.fetch = fp.Plan(toFetch[:1])
			toFetch = toFetch[1:]
		default:
			t.fetch = fp.Plan(toFetch)
			toFetch = toFetch[1:]
		}
		if t.fetch != nil {
			for _, g := range t.fetch.Owned {
				t.ahead += g.Bytes
			}
		}
		if err := it.e.depth.admit(ctx, t.ahead); err != nil {
			if t.kept != nil {
				t.kept.release()
			}
			yield(nil, err)
			return
		}
		it.fill.read()
		if !yield(t, nil) {
			return
		}
	}
}

// fetchStage is the fetch stage: fetching is I/O, so many windows are in
// flight at once to hide storage latency.
func (it *iteration) fetchStage(ctx context.Context, reads iter.Seq2[*readTask, error]) iter.Seq2[*fetchedWindow, error] {
	return prefetch.Map(ctx, reads, prefetch.Stage[*readTask, *fetchedWindow]{
		Name:        "fetch",
		Concurrency: it.o.Limits.fetchWindows(),
		Ahead:       it.o.Limits.fetchWindows(),
		MaxBytes:    it.o.Limits.PrefetchBytes,
		Size:        func(f *fetchedWindow) int64 { return f.bytes },
		Fn:          it.fetch,
		ReleaseIn: func(t *readTask) {
			if t.kept != nil {
				t.kept.release()
			}
		},
		ReleaseOut: func(f *fetchedWindow) {
			f.release()
			if f.kept != nil {
				f.kept.release()
			}
		},
		Hooks: prefetch.Hooks{
			Done: func(el time.Duration, _ int64) { it.m.AddFetch(el) },
		},
	})
}

// fetch brings one window's stored bytes into memory (a kept window passes
// through as it is).
func (it *iteration) fetch(ctx context.Context, t *readTask) (*fetchedWindow, error) {
	if t.kept != nil {
		return &fetchedWindow{ref: t.ref, kept: t.kept}, nil
	}
	f, err := it.e.fetchWindow(ctx, it.ep, t.fetch, &it.shared)
	if f != nil {
		f.ahead = t.ahead
	}
	return f, err
}

// taken is the fetched windows as the decode stage takes them: each one
// leaves the bytes ahead of the decoders, and a decode stage that waited
// for it was starved of bytes (ahead.go).
func (it *iteration) taken(fetched iter.Seq2[*fetchedWindow, error]) iter.Seq2[*fetchedWindow, error] {
	return func(yield func(*fetchedWindow, error) bool) {
		asked := time.Now()
		for f, err := range fetched {
			if f != nil {
				it.e.depth.took(f.ahead, time.Since(asked))
			}
			if !yield(f, err) {
				return
			}
			asked = time.Now()
		}
	}
}

// decodeStage is the decode stage: decoding is CPU, so as many goroutines
// as cores (ReadConcurrency), each window read ahead of the cut stage up
// to PrefetchWindows.
func (it *iteration) decodeStage(ctx context.Context, fetched iter.Seq2[*fetchedWindow, error]) iter.Seq2[*window, error] {
	return prefetch.Map(ctx, fetched, prefetch.Stage[*fetchedWindow, *window]{
		Name:        "decode",
		Concurrency: it.o.Limits.ReadConcurrency,
		Ahead:       it.o.Limits.PrefetchWindows,
		MaxBytes:    it.o.Limits.PrefetchBytes,
		Size:        func(w *window) int64 { return w.bytes },
		Fn:          it.decode,
		// The cut stage takes windows in order: the one it waits for
		// gets more goroutines than the others (prefetch.Waited).
		Waited: true,
		ReleaseIn: func(f *fetchedWindow) {
			f.release()
			if f.kept != nil {
				f.kept.release()
			}
		},
		ReleaseOut: func(w *window) { w.release() },
		Hooks: prefetch.Hooks{
			Done: func(el time.Duration, _ int64) {
				it.m.AddFetch(el)
				it.fill.decoded(it.m)
			},
			Queue: func(n int, b int64) { it.m.SetRawQueue(n, b) },
		},
	})
}

// decode turns one fetched window into record batches, in its row order
// (a kept window passes through as it is). Where the pipeline shares
// decode slots with others (a mix's lanes), it waits for one first.
func (it *iteration) decode(ctx context.Context, f *fetchedWindow) (*window, error) {
	if f.kept != nil {
		w := f.kept
		f.kept = nil // handed on
		return w, nil
	}
	if slots := it.o.decoding; slots != nil {
		select {
		case slots <- struct{}{}:
			defer func() { <-slots }()
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	start := time.Now()
	w, err := it.e.decodeWindow(ctx, it.ep, f)
	if err == nil {
		it.rates.learn(w)
		it.e.depth.decoded(f.bytes, time.Since(start))
	}
	return w, err
}

// transformStage is the transform stage: it builds each batch out of its
// windows and applies fn, on TransformConcurrency goroutines, up to
// PrefetchBatches ahead of the consumer.
func transformStage[T any](ctx context.Context, it *iteration, jobs iter.Seq2[*job, error], fn func(context.Context, arrow.RecordBatch) (T, error), releaseOut func(T)) iter.Seq2[result[T], error] {
	return prefetch.Map(ctx, jobs, prefetch.Stage[*job, result[T]]{
		Name:        "transform",
		Concurrency: it.o.Limits.TransformConcurrency,
		Ahead:       it.o.Limits.PrefetchBatches,
		Size:        func(r result[T]) int64 { return r.bytes },
		Fn: func(ctx context.Context, j *job) (result[T], error) {
			v, err := transform(ctx, it.e, it.ep, j, fn)
			return result[T]{val: v, plan: j.plan, bytes: j.bytes}, err
		},
		ReleaseIn: func(j *job) { j.release() },
		ReleaseOut: func(r result[T]) {
			if releaseOut != nil {
				releaseOut(r.val)
			}
		},
		Hooks: prefetch.Hooks{
			Done:  func(el time.Duration, _ int64) { it.m.AddTransform(el) },
			Queue: func(n int, b int64) { it.m.SetPrefetchQueue(n, b) },
			Wait:  it.fill.wait(it.m),
		},
	})
}

// transform builds one batch from its windows and applies fn.
func transform[T any](ctx context.Context, e *Engine, ep *split.Epoch, j *job, fn func(context.Context, arrow.RecordBatch) (T, error)) (out T, err error) {
	b, err := func() (arrow.RecordBatch, error) {
		defer j.release() // also if build panics: the stage reports the panic
		return build(ctx, e.data.Schema, j, e.opts.Allocator)
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

// result is a transformed batch and where taking it leaves the state.
type result[T any] struct {
	val  T
	plan split.Batch
	// bytes is the job's: the size of the batch the result was made of,
	// which the prefetch queue reports (a Map result's own size is the
	// user's type's to know).
	bytes int64
}

// deliver hands the results to the consumer in order, each taken batch
// moving the position. It reports whether the consumer took the epoch's
// every batch; where the consumer stops early, the stages finish and their
// results are released, so that the next iteration finds what they
// decoded instead of fetching it again.
func deliver[T any](ctx context.Context, cancel context.CancelFunc, it *iteration, results iter.Seq2[result[T], error], yield func(T, error) bool, releaseOut func(T)) bool {
	var zero T
	for r, err := range results {
		if err != nil {
			if it.stopping.Load() {
				// The consumer has gone: a failure now only costs the
				// next iteration a read.
				break
			}
			it.e.kept.drop()
			// The stages' own errors already name the epoch, split and
			// window or batch; the pipeline's item numbers mean nothing
			// to a user.
			var ie *prefetch.ItemError
			for errors.As(err, &ie) {
				err = ie.Err
			}
			if ctx.Err() != nil && errors.Is(err, context.Canceled) {
				err = fmt.Errorf("stream: epoch %d: %w", it.ep.Epoch, err)
			}
			cancel()
			yield(zero, err)
			return false
		}
		if it.stopping.Load() {
			if releaseOut != nil {
				releaseOut(r.val)
			}
			continue
		}
		it.e.took(r.plan)
		if !yield(r.val, nil) {
			it.stopping.Store(true)
		}
	}
	if it.stopping.Load() {
		return false
	}
	if ctx.Err() != nil {
		it.e.kept.drop()
		yield(zero, ctx.Err())
		return false
	}
	return true
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
