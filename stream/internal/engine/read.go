package engine

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"golang.org/x/sync/errgroup"

	"github.com/sluicedata/sluice/formats"
	"github.com/sluicedata/sluice/internal/unzeroed"
	"github.com/sluicedata/sluice/prefetch"
	"github.com/sluicedata/sluice/split"
)

// readTask is one window for the read stages: fetched by its Task,
// or kept from an earlier iteration.
type readTask struct {
	ref   split.WindowRef
	fetch *Task
	kept  *window
	// ahead is the bytes its fetch brings: those of the groups it owns.
	ahead int64
}

// groups holds the fetches of one iteration that windows share: a group
// is made by its first window and taken from by each of its pieces' windows.
type groups struct {
	mu sync.Mutex
	m  map[*Group]*group
}

// group is a fetch in progress or done.
type group struct {
	done  chan struct{} // closed once whole or err is set
	whole *formats.Fetched
	err   error
	left  int // pieces not yet taken
}

func (gs *groups) get(g *Group) *group {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	if gs.m == nil {
		gs.m = map[*Group]*group{}
	}
	st := gs.m[g]
	if st == nil {
		st = &group{done: make(chan struct{}), left: g.Pieces}
		gs.m[g] = st
	}
	return st
}

// took records that one piece of g was taken; the group's bytes go with
// its last, and the whole fetch is released (each piece holds its bytes
// until it is decoded).
func (gs *groups) took(g *Group) {
	gs.mu.Lock()
	var whole *formats.Fetched
	if st := gs.m[g]; st != nil {
		if st.left--; st.left <= 0 {
			delete(gs.m, g)
			whole = st.whole
		}
	}
	gs.mu.Unlock()
	whole.Release()
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

// fetchedWindow is a window whose stored bytes are in memory, or a window
// kept decoded from an earlier iteration.
type fetchedWindow struct {
	ref    split.WindowRef
	pieces []*formats.Fetched // in window order
	bytes  int64
	kept   *window
	// ahead is its readTask's.
	ahead int64
}

// release lets the fetched bytes of the window's pieces go to later
// fetches: the pieces are decoded, or never will be.
func (f *fetchedWindow) release() {
	for _, p := range f.pieces {
		p.Release()
	}
}

// fetchWindow makes the fetches a window's task owns, concurrently, then
// takes each of its pieces from its group, waiting for groups that an
// earlier window's fetch makes.
func (e *Engine) fetchWindow(ctx context.Context, ep *split.Epoch, t *Task, shared *groups) (*fetchedWindow, error) {
	r := t.Ref
	wrap := func(err error) error {
		return fmt.Errorf("%w (stream: epoch %d, split %d, window %d)", err, ep.Epoch, r.Split, r.Window)
	}
	g, gctx := errgroup.WithContext(ctx)
	for _, pg := range t.Owned {
		st := shared.get(pg)
		g.Go(func() error {
			defer close(st.done)
			id := e.depth.request(e.runsLocally(pg.Range.Fragment), pg.Bytes)
			st.whole, st.err = e.data.Fetch(gctx, pg.Range.Fragment, rangeOf(pg.Range))
			e.depth.fetched(id, st.err == nil)
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

// runsLocally reports whether fragment i is read by this process's CPUs,
// not waited for (ahead.go): a local file, or a bucket in memory. A
// wrapper that makes a local bucket wait as a distant store does (the
// tests' and the bench's latency) gives a scheme of its own.
func (e *Engine) runsLocally(i int) bool {
	b := e.data.Fragments[i].Source.Bucket
	return b != nil && (b.Scheme() == "file" || b.Scheme() == "mem")
}

// rangeOf is what a piece reads of its file.
func rangeOf(p split.Piece) formats.Range {
	return formats.Range{Start: p.Start, End: p.End, FirstUnit: p.FirstUnit, EndUnit: p.EndUnit}
}

// decodeWindow decodes a fetched window and puts its rows in their order
// (permute).
func (e *Engine) decodeWindow(ctx context.Context, ep *split.Epoch, f *fetchedWindow) (*window, error) {
	decodingWindows.Add(1)
	defer decodingWindows.Add(-1)
	// A driver that spreads a batch's columns over goroutines does so
	// for the window the cut stage waits for, whatever the other decodes.
	stage := ctx
	ctx = formats.WithWaited(ctx, func() bool { return prefetch.Waited(stage) })
	r := f.ref
	wd := ep.Windows[r.Split][r.Window]
	early := drawOrderEarly(ep, r)
	defer early.wait()
	w := &window{ref: r}
	w.refs.n = 1
	segments := make([]int64, 0, len(f.pieces))
	var skipped int64
	mem := e.decodeAllocator()
	defer f.release()
	for _, p := range f.pieces {
		before := w.rows
		bad, err := e.data.Decode(ctx, p, e.opts.Limits.ReadBatchSize, mem, func(b arrow.RecordBatch) error {
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
	keep, segments, err := passRows(ep, r, segments, w.rows)
	if err != nil {
		w.release()
		return nil, err
	}
	if kept := sum(segments); wd.Rows >= 0 && kept != wd.Rows {
		w.release()
		return nil, fmt.Errorf("stream: epoch %d split %d window %d: read %d rows, the plan has %d: %w", ep.Epoch, r.Split, r.Window, kept, wd.Rows, formats.ErrCorrupt)
	}
	if w.rows > math.MaxInt32 {
		w.release()
		return nil, fmt.Errorf("stream: epoch %d split %d window %d: %d rows is more than a window can order (ShuffleWindow bounds it where counts are known)", ep.Epoch, r.Split, r.Window, w.rows)
	}
	order := early.take(segments)
	if order == nil {
		order = ep.RowOrder(r, segments)
	}
	switch {
	case keep != nil && order == nil:
		order = keep // the kept rows in storage order
	case keep != nil:
		// The order is over the kept rows; the window holds every row
		// decoded.
		for i, k := range order {
			order[i] = keep[k]
		}
	}
	if order != nil && w.rows > 0 {
		// A window the filter emptied has nothing to put in order (and no
		// batch to concatenate for the gathers that work on one).
		if err := e.permute(ctx, w, order, mem); err != nil {
			w.release()
			return nil, fmt.Errorf("%w (stream: epoch %d, split %d, window %d)", err, ep.Epoch, r.Split, r.Window)
		}
	}
	e.skips.record(r, skipped)
	return w, nil
}

// earlyOrder is a window's row order drawn while its pieces decode, from
// the rows the plan says they keep: a window's order is a draw per row
// that waits for nothing but the pieces' row counts, and drawn after the
// decode it is on the window's path to the consumer, on one goroutine.
type earlyOrder struct {
	segments []int64 // the pieces' rows it was drawn for
	order    []int32
	done     chan struct{}
}

// drawOrderEarly starts drawing window r's order where the epoch shuffles
// and the plan knows every piece's rows; otherwise it returns nil.
func drawOrderEarly(ep *split.Epoch, r split.WindowRef) *earlyOrder {
	if !ep.Order.Shuffle {
		return nil
	}
	pieces := ep.Pieces(r)
	segments := make([]int64, len(pieces))
	for i, p := range pieces {
		if segments[i] = p.Rows(); segments[i] < 0 {
			return nil
		}
	}
	e := &earlyOrder{segments: segments, done: make(chan struct{})}
	go func() {
		defer close(e.done)
		// A panic leaves no order: the decode then draws it on its own
		// goroutine, where the stage recovers it.
		defer func() { _ = recover() }()
		e.order = ep.RowOrder(r, segments)
	}()
	return e
}

// take returns the order drawn early if it was drawn for the rows the
// pieces turned out to keep (segments), or nil: the order is a function
// of those counts, so it is the order the decode would draw.
func (e *earlyOrder) take(segments []int64) []int32 {
	if e == nil {
		return nil
	}
	<-e.done
	if !slices.Equal(e.segments, segments) {
		return nil
	}
	order := e.order
	e.order = nil
	return order
}

// wait returns once the draw is over, so that none outlives its decode.
func (e *earlyOrder) wait() {
	if e != nil {
		<-e.done
	}
}

// passRows is, where the epoch reads its chunks in passes, the rows of
// window r that its pieces keep, as indices among the rows decoded for it,
// and each piece's kept rows, given the rows each decoded (segments, rows in
// all); without passes, nil and segments. A piece of a pass decodes every
// row of its span and keeps its pass's (split.Pass): the window's order is
// then over the kept rows, as the plan counts them, and permuting the
// window gathers those alone, the rows of other passes going with the
// decoded buffers.
func passRows(ep *split.Epoch, r split.WindowRef, segments []int64, rows int64) ([]int32, []int64, error) {
	if ep.Order.Passes <= 1 {
		return nil, segments, nil
	}
	if rows > math.MaxInt32 {
		return nil, nil, fmt.Errorf("stream: epoch %d split %d window %d: %d rows is more than a window can order", ep.Epoch, r.Split, r.Window, rows)
	}
	pieces := ep.Pieces(r)
	keep := make([]int32, 0, rows/int64(ep.Order.Passes)+int64(len(pieces)))
	kept := make([]int64, len(pieces))
	var at int64
	for i, p := range pieces {
		if segments[i] != p.Span() {
			return nil, nil, fmt.Errorf("stream: epoch %d split %d window %d: read %d rows of file %d's rows [%d, %d): %w", ep.Epoch, r.Split, r.Window, segments[i], p.Fragment, p.Start, p.End, formats.ErrCorrupt)
		}
		before := len(keep)
		for k := range segments[i] {
			if p.Pass.Keeps(p.Start + k) {
				keep = append(keep, int32(at+k))
			}
		}
		kept[i] = int64(len(keep) - before)
		at += segments[i]
	}
	return keep, kept, nil
}

func sum(xs []int64) int64 {
	var n int64
	for _, x := range xs {
		n += x
	}
	return n
}

// permute is the decode stage's last step for a shuffled window: it puts
// the window's rows in their shuffled order once (window.reorder says why),
// so that the transform stage slices batches off it. mem is what the
// window was decoded into; where that is the recycler, it is bounded to
// what a round of decoders reuses, and a mix's lane permutes into it too.
func (e *Engine) permute(ctx context.Context, w *window, order []int32, mem memory.Allocator) error {
	out := e.opts.Allocator
	if rc, ok := mem.(*recycler); ok {
		// A round of decoders, each with a window's decoded buffers,
		// pages and scratch: what the next round reuses.
		n := 2 * int64(e.opts.Limits.ReadConcurrency)
		if e.opts.recyclePermuted {
			// And the permuted windows: those read ahead, and the
			// one being taken.
			n += int64(e.opts.Limits.PrefetchWindows) + 1
			out = rc
			if gathersFast(e.data.Schema) {
				out = unzeroedRecycler{unzeroed.Filled{Recycler: rc.Recycler}}
			}
		}
		rc.Fit(n * w.bytes)
	}
	return w.reorder(ctx, e.data.Schema, order, out, permuteWorkers(ctx, e.data.Schema.NumFields(), w.rows))
}

// decodingWindows counts the windows being decoded in the process, which
// share its cores.
var decodingWindows atomic.Int64

// minSpreadRows is the fewest rows of a window whose columns are worth
// permuting on more than one goroutine.
const minSpreadRows = 4096

// permuteWorkers is how many goroutines a window of rows rows and cols
// columns is permuted on: its share of the cores among the windows being
// decoded, or all of them where the cut stage waits for it. A window's
// columns permute independently, and the cut stage can hand nothing on
// until the window it waits for is in order, so that one goes first.
func permuteWorkers(ctx context.Context, cols int, rows int64) int {
	if cols < 2 || rows < minSpreadRows {
		return 1
	}
	procs := runtime.GOMAXPROCS(0)
	if prefetch.Waited(ctx) {
		return min(cols, procs)
	}
	return max(1, min(cols, procs/int(max(decodingWindows.Load(), 1))))
}
