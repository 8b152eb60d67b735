package engine

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/sluicedata/sluice/checkpoint"
	"github.com/sluicedata/sluice/formats"
	"github.com/sluicedata/sluice/internal/unzeroed"
	"github.com/sluicedata/sluice/metrics"
	"github.com/sluicedata/sluice/permutation"
	"github.com/sluicedata/sluice/split"
)

// ErrBusy is returned when a second iteration is started on an engine while
// one is running: an engine has one position, so one consumer.
// stream.ErrBusy is this error.
var ErrBusy = errors.New("stream: an iteration is already running on this dataset")

// Options are what the engine runs by: a dataset's options less what only
// planning needs, with the defaults filled in (stream.Options documents
// each and its default). stream builds them once per Open.
type Options struct {
	// Order decides which rows each split emits and in which order.
	Order permutation.Order
	// Limits bound the goroutines and the read-ahead.
	Limits    Limits
	BatchSize int
	// Epoch is the epoch New starts at.
	Epoch        int64
	EqualBatches bool
	Rank         int
	WorldSize    int

	Allocator memory.Allocator
	Metrics   *metrics.Pipeline
	Logger    *slog.Logger

	// NoRecycle decodes shuffled windows into the Allocator's buffers, not
	// recycled ones (recycle.go): tests compare the two.
	NoRecycle bool

	// recyclePermuted and decoding are a mix lane's (lane.go).
	//
	// recyclePermuted: shuffled windows are permuted into recycled buffers
	// too, the window's rows being the pipeline's alone after it (the mix
	// copies every row it takes).
	recyclePermuted bool
	// decoding, where set, is shared with other pipelines (a mix's lanes):
	// a window's decode holds one of its slots while it runs, so that the
	// pipelines together decode no more windows at once than it has slots.
	decoding chan struct{}
}

// Limits are stream.Limits, field for field, with the defaults filled in:
// the goroutines of each stage and what it reads ahead and caches.
// stream.Limits documents each. stream hands its value over whole, by a
// conversion, so the compiler keeps the two lists the same: a new bound
// is a field there, with its doc and default, and the same field here.
type Limits struct {
	FetchConcurrency     int
	ReadConcurrency      int
	TransformConcurrency int
	PrefetchBatches      int
	PrefetchWindows      int
	PrefetchBytes        int64
	FetchAheadBytes      int64
	ReadBatchSize        int
	TakeCacheBytes       int64
	PlanConcurrency      int
}

// sharedOut is o for a pipeline given part of o's budget (a
// consumer, one of n, gets 1/n; a mix's lane its source's share of the mix
// over the splits it runs at once): the concurrency and read-ahead bounds
// are scaled by part, none below one, so that the pipelines together hold
// what one would; each gets metrics of its own.
func (o Options) sharedOut(part float64) Options {
	// The nudge keeps n × 1/k a whole n/k where floating point falls
	// just short of it.
	scale := func(n int) int { return max(1, int(float64(n)*part+1e-9)) }
	co := o
	l, cl := &o.Limits, &co.Limits
	if l.FetchConcurrency > 0 { // 0: the byte budget decides
		cl.FetchConcurrency = scale(l.FetchConcurrency)
	}
	cl.ReadConcurrency = scale(l.ReadConcurrency)
	cl.TransformConcurrency = scale(l.TransformConcurrency)
	cl.PrefetchBatches = scale(l.PrefetchBatches)
	cl.PrefetchWindows = scale(l.PrefetchWindows)
	cl.PrefetchBytes = int64(float64(l.PrefetchBytes)*part + 1e-9)
	if l.PrefetchBytes > 0 {
		cl.PrefetchBytes = max(1, cl.PrefetchBytes)
	}
	cl.FetchAheadBytes = max(1, int64(float64(l.FetchAheadBytes)*part+1e-9))
	co.Metrics = metrics.New()
	return co
}

// Plan is what planning made that the engine reads by.
type Plan struct {
	// Chunks is the chunk list the plan fingerprint covers.
	Chunks []split.Chunk
	// ID is the plan fingerprint.
	ID string
	// Counts are the counting pass's rows of the chunks the plan does not
	// know (CountRows), nil where none was needed.
	Counts []int64
	// PlaceBytes is the least stored bytes of a chunk cut from a unit
	// (split.ChunkOptions.CutBytes): fetches that go on in such a unit
	// join up to this many bytes (Fetches.UnitJoinBytes). 0: JoinBytes.
	PlaceBytes int64
}

// Engine streams one planned dataset from a position: the position itself
// (an epoch, a cursor per split, the round-robin's next split), the
// windows decoded ahead that an iteration stopped early left for the next
// one, and the caches random access and recycled buffers keep. Its
// methods are safe to call from several goroutines, but only one
// iteration (Run) runs at a time.
type Engine struct {
	opts   Options
	data   *formats.Scan
	chunks []split.Chunk
	planID string
	// placeBytes is Plan.PlaceBytes.
	placeBytes int64
	// counts are the counting pass's rows of chunks the plan does not know
	// (EqualBatches), nil where none was needed.
	counts []int64
	// order is OrderState, made once: a state is taken after every batch
	// where a caller reads ahead (the C ABI), and its fingerprint, a hash
	// of what never changes, cost most of it.
	orderOnce sync.Once
	order     checkpoint.State

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
	// EqualBatches, unused without (so that an engine made without the
	// option, such as a consumer's of Dataset.Consumers, needs no setting). every
	// holds every split's cursor where all ranks' positions are known (the
	// start of an epoch, a merged state), nil elsewhere: Consumers
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
	// made on first need, unless Options.NoRecycle.
	recycled atomic.Pointer[recycler]
	// depth admits windows to the fetch stage by bytes (ahead.go), and
	// keeps what it learned of latency and rates between iterations.
	depth *ahead
}

// New is the engine of a planned dataset, its fragments data (which the
// caller closes, after the engine), at the start of epoch o.Epoch.
func New(data *formats.Scan, p Plan, o Options) (*Engine, error) {
	if err := passesCounted(o, data, p.Chunks); err != nil {
		return nil, err
	}
	e := newEngine(data, p, o)
	if err := e.startEpoch(o.Epoch); err != nil {
		return nil, err
	}
	return e, nil
}

// passesCounted refuses passes (Options.ShufflePasses) over chunks whose
// row counts the plan does not know: which rows a pass keeps, and so how
// the splits balance, is counted in rows before reading.
func passesCounted(o Options, data *formats.Scan, chunks []split.Chunk) error {
	if o.Order.Passes <= 1 {
		return nil
	}
	for _, c := range chunks {
		if c.Rows() < 0 {
			f := data.Fragments[c.Fragment]
			return fmt.Errorf("stream: ShufflePasses %d needs every unit's exact row count before reading, and %s (%s) does not know its (CSV and JSON files, a filter, Iceberg equality deletes): %w",
				o.Order.Passes, f.URL, f.Format, split.ErrUnknownRows)
		}
	}
	return nil
}

// newEngine is an engine without a position: its maker moves it to one.
func newEngine(data *formats.Scan, p Plan, o Options) *Engine {
	return &Engine{opts: o, data: data, chunks: p.Chunks, planID: p.ID, counts: p.Counts, placeBytes: p.PlaceBytes,
		depth: newAhead(o.Limits, o.Metrics)}
}

// Options are the options the engine runs by.
func (e *Engine) Options() Options { return e.opts }

// Metrics is the pipeline's live figures.
func (e *Engine) Metrics() *metrics.Pipeline { return e.opts.Metrics }

// Chunks is the chunk list the plan fingerprint covers.
func (e *Engine) Chunks() []split.Chunk { return e.chunks }

// Fingerprint is the plan fingerprint.
func (e *Engine) Fingerprint() string { return e.planID }

// SetNoRecycle sets Options.NoRecycle; it takes effect at the next
// iteration that makes the recycler.
func (e *Engine) SetNoRecycle(on bool) { e.opts.NoRecycle = on }

// Close releases the windows read ahead and what the caches hold. It does
// not stop a running iteration; cancel its context for that.
func (e *Engine) Close() {
	e.kept.drop()
	e.rand.cache.drop()
	if r := e.recycled.Load(); r != nil {
		r.Release()
	}
}

// Current is the epoch the next batch comes from.
func (e *Engine) Current() *split.Epoch {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.ep
}

// SetEpoch moves to the start of epoch n. It fails while iterating.
func (e *Engine) SetEpoch(n int64) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.running {
		return ErrBusy
	}
	return e.startEpoch(n)
}

// decodeAllocator is what windows are decoded into: recycled buffers
// where the window is permuted (its decoded buffers are the pipeline's
// alone), the user's allocator otherwise. Either way, where the buffers
// come from Go's allocator, a decoder that sets every byte of a buffer
// may take it unzeroed (unzeroed.Offer).
func (e *Engine) decodeAllocator() memory.Allocator {
	if !e.opts.Order.Shuffle || e.opts.NoRecycle {
		return unzeroed.Offer(e.opts.Allocator)
	}
	if r := e.recycled.Load(); r != nil {
		return r
	}
	e.recycled.CompareAndSwap(nil, newRecycler(unzeroed.Offer(e.opts.Allocator)))
	return e.recycled.Load()
}

// aheadCursor is a split's position in a later epoch than the engine's.
// States taken at an epoch's boundary merge with each split in its own
// rank's epoch (checkpoint.State.Epochs): a rank that loads such a merge
// finishes the older epoch's splits first, while the splits already in a
// later one wait, and takes each up where it stands once its own epoch
// comes.
type aheadCursor struct {
	epoch  int64
	cursor split.Cursor
}

// startEpoch moves to epoch n with every cursor at its start.
func (e *Engine) startEpoch(n int64) error {
	e.ahead = nil
	return e.enterEpoch(n)
}

// enterEpoch moves to epoch n: the splits e.ahead holds in n resume where
// they stand, those in later epochs wait at n's end, and the others start
// at n's start; with EqualBatches it counts the batches every rank takes.
// e.mu is held.
func (e *Engine) enterEpoch(n int64) error {
	ep, err := e.newEpoch(n)
	if err != nil {
		return fmt.Errorf("stream: epoch %d: %w", n, err)
	}
	cursors := make([]split.Cursor, e.opts.Order.NumSplits)
	for s, a := range e.ahead {
		if a.epoch == n {
			cursors[s] = a.cursor
			delete(e.ahead, s)
		} else {
			cursors[s] = ep.End(s)
		}
	}
	if len(e.ahead) == 0 {
		e.ahead = nil
	}
	e.moveTo(ep, cursors, 0)
	// Every rank enters an epoch with its splits that are not ahead at the
	// start (with EqualBatches, every rank finishes the last at one step),
	// and e.ahead holds every rank's that are: every cursor is known.
	return e.countEqual(slices.Clone(cursors))
}

// newEpoch is epoch n's order, with the counting pass's counts where there
// was one.
func (e *Engine) newEpoch(n int64) (*split.Epoch, error) {
	ep, err := split.NewEpoch(e.chunks, e.opts.Order, n)
	if err == nil && e.counts != nil {
		err = ep.Count(e.counts)
	}
	return ep, err
}

// countEqual sets left from every split's cursors: the batches every rank
// takes with EqualBatches. e.mu is held, or e not yet shared.
func (e *Engine) countEqual(every []split.Cursor) error {
	e.left, e.every = 0, nil
	o := e.opts
	if !o.EqualBatches {
		return nil
	}
	n, err := e.ep.EqualBatches(o.WorldSize, o.BatchSize, every)
	if err != nil {
		return fmt.Errorf("stream: epoch %d: %w", e.ep.Epoch, err)
	}
	if n == 0 && o.Rank == 0 {
		// A rank with nothing left makes every rank take nothing: say so
		// where the others have rows, which are then all dropped.
		for r := range o.WorldSize {
			if e.ep.RankBatches(r, o.WorldSize, o.BatchSize, every) > 0 {
				o.Logger.Warn("stream: EqualBatches: a rank has no batch left in this epoch, so no rank takes any; the rows the others have are dropped (fewer NumSplits, or smaller ChunkBytes, give every rank rows)",
					"epoch", e.ep.Epoch, "num_splits", o.Order.NumSplits, "world_size", o.WorldSize, "chunks", len(e.chunks))
				break
			}
		}
	}
	e.left, e.every = n, every
	return nil
}

// moveTo sets the position; windows kept for another position go. e.mu is
// held.
func (e *Engine) moveTo(ep *split.Epoch, cursors []split.Cursor, next int) {
	e.kept.drop()
	e.skips.reset()
	e.ep, e.cursors, e.next = ep, cursors, next
	e.opts.Metrics.SetEpoch(ep.Epoch)
	e.opts.Metrics.SetUnscannedRows(e.unscanned())
	e.opts.Metrics.SetRefetchBytes(overlap(e.data.Fragments, ep, e.opts.Rank, e.opts.WorldSize).RankBytes)
}

// took moves the position past batch b, which the consumer has just
// taken: taking a batch is what moves the state, so a state taken in the
// loop body resumes after it. The windows b finished go, and the
// metrics count it.
func (e *Engine) took(b split.Batch) {
	e.mu.Lock()
	skipped := e.finish(b.Split, b.After.Window)
	e.cursors[b.Split] = b.After
	e.next = b.Next
	e.every = nil // other ranks' cursors moved too, unseen
	if e.opts.EqualBatches && e.left > 0 {
		e.left--
	}
	e.mu.Unlock()
	for _, p := range b.Parts {
		if p.Last {
			e.kept.done(p.Ref)
		}
	}
	m := e.opts.Metrics
	m.AddConsumed(b.Rows, 1)
	m.AddSkipped(skipped)
	m.SetUnscannedRows(e.unscannedNow())
}

// nextEpoch moves to the epoch after ep, whose every batch the consumer
// has taken, counting the bad rows of the windows no batch finished.
func (e *Engine) nextEpoch(ep *split.Epoch) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.opts.Metrics.AddSkipped(e.finishEpoch())
	return e.enterEpoch(ep.Epoch + 1)
}

// unscanned is the rows of this rank's splits not yet delivered this epoch
// (the metrics' "unscanned rows"); e.mu is held.
func (e *Engine) unscanned() int64 {
	var n int64
	for _, s := range split.Owned(e.opts.Order.NumSplits, e.opts.Rank, e.opts.WorldSize) {
		n += max(e.ep.Remaining(s, e.cursors[s]), 0)
	}
	return n
}

// unscannedNow is unscanned under the engine's lock.
func (e *Engine) unscannedNow() int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.unscanned()
}
