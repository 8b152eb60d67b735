package engine

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/sluicedata/sluice/permutation"
	"github.com/sluicedata/sluice/prefetch"
	"github.com/sluicedata/sluice/split"
)

// A mix reads each source the way a dataset is read: split s of source k
// is streamed by the source's own pipeline (windows read whole, shuffled
// rows gathered out of them), pass after pass, in a lane of its own
// (lane.go). The mixer decides, for each chunk of a split (several
// batches), how many rows each source gives it (permutation.Mix's closed-form
// counts), cuts runs of that many consecutive rows off the sources' lanes,
// gathers them into the mix's order, and hands the chunk out as batches
// sliced off it. Each source's own options (concurrency, prefetch bounds)
// are shared out among its lanes, each lane given the source's share of
// the mix over the rank's mixed splits (see share), and all the lanes
// decode no more windows at once than one source would (see DecodeSlots).

// MixSource is one source of a mix: its engine, and its weight.
type MixSource struct {
	Engine *Engine
	Weight float64
}

// Mix is what a mix's iterations read by: its sources, how they
// interleave, and the mix's own options (stream.MixOptions documents
// them).
type Mix struct {
	Sources []MixSource
	// Walk interleaves the sources. Its methods are not safe for
	// concurrent use: the caller guards it, and holds that lock around
	// Open.
	Walk *permutation.Mix
	// Rows is the rows of a pass of each source's splits: Rows[k][s].
	Rows   [][]int64
	Schema *arrow.Schema

	BatchSize   int
	Rank        int
	WorldSize   int
	Concurrency int
	Prefetch    int
	NoRepeat    bool
	// ChunkRows is about the rows of a chunk (DefaultChunkRows).
	ChunkRows int64
}

// DefaultChunkRows is about the rows of a chunk: the mix puts its rows
// together a chunk of several batches at a time, and hands out each batch
// as a slice of its chunk, as a shuffled dataset slices its permuted
// windows: per batch, the hand-offs between goroutines and the making of a
// batch's buffers and plan cost as much again as the copy of 1,024 rows.
const DefaultChunkRows = 8192

// DecodeSlots is how many windows the mix's lanes decode at once, all
// sources together: as many as the most concurrent source decodes alone.
// Each lane has decoders of its own (its share of its source's), and
// there are more lanes than cores; left to run at once, they take turns
// on the cores mid-window, each turn finding the caches full of another
// window's columns: an epoch of the bench's three sources cost 1-3% more
// CPU and about 2% more time than with the slots (alternated runs).
func (m *Mix) DecodeSlots() int {
	n := 1
	for _, s := range m.Sources {
		n = max(n, s.Engine.opts.Limits.ReadConcurrency)
	}
	return n
}

// share is the part of the mix's rows that source k gives (its weight over
// the sum of them): its lanes together get that part of its concurrency
// and read-ahead bounds, so that where the sources are opened with the
// same options the whole mix holds what one of them would. Lanes given
// each their source's whole budget decode several windows per core at
// once, and on two cores that cost a quarter more decoding CPU per row
// than the same windows decoded one per core.
func (m *Mix) share(k int) float64 {
	var sum float64
	for _, s := range m.Sources {
		sum += s.Weight
	}
	return m.Sources[k].Weight / sum
}

// MixRun is one iteration of a mix: the lanes of the rank's mixed splits,
// open at the position it starts from.
type MixRun struct {
	m       *Mix
	epoch   int64
	cursors []int64 // per mixed split: rows delivered this epoch
	next    int
	owned   []int
	lens    []int64 // per mixed split: its rows in the epoch
	walks   map[int]*permutation.MixWalk
	lanes   map[[2]int]*mixLane // by (split, source)
}

// Open opens the lanes of the rank's mixed splits at the position: epoch,
// each split's rows delivered (cursors) and the round-robin's next split.
// The lanes' pipelines run under ctx. The caller holds the lock that
// guards m.Walk; on an error, what was opened is closed.
func (m *Mix) Open(ctx context.Context, epoch int64, cursors []int64, next int) (*MixRun, error) {
	r := &MixRun{m: m, epoch: epoch, cursors: cursors, next: next,
		owned: split.Owned(len(cursors), m.Rank, m.WorldSize), lens: make([]int64, len(cursors)),
		walks: map[int]*permutation.MixWalk{}, lanes: map[[2]int]*mixLane{}}
	decoding := make(chan struct{}, m.DecodeSlots())
	for _, s := range r.owned {
		r.lens[s] = m.Walk.Len(epoch, s)
		var err error
		if r.walks[s], err = m.Walk.Walk(epoch, s, cursors[s]); err == nil {
			err = r.openLanes(ctx, s, decoding)
		}
		if err != nil {
			r.Close()
			return nil, err
		}
	}
	return r, nil
}

// openLanes opens the lanes of mixed split s, each source's where the mix's
// position (the split's cursor in the run's epoch) leaves it: its pass and
// offset follow from the closed-form counts; decoding is the lanes' decode
// slots.
func (r *MixRun) openLanes(ctx context.Context, s int, decoding chan struct{}) error {
	m, epoch := r.m, r.epoch
	counts := m.Walk.Counts(epoch, s, r.cursors[s])
	end := m.Walk.Counts(epoch, s, m.Walk.Len(epoch, s))
	start := m.Walk.Start(epoch, s)
	for k, src := range m.Sources {
		rows := m.Rows[k][s]
		if rows == 0 || end[k] == counts[k] {
			continue // the rest of the epoch takes nothing of it
		}
		// The rows it gives: from counts[k] to end[k] of its rows in the
		// mix, in its passes.
		span := laneSpan{pass: epoch, q: counts[k], lastPass: epoch, last: end[k] - 1}
		if !m.NoRepeat {
			g, gEnd := start[k]+counts[k], start[k]+end[k]
			span = laneSpan{pass: g / rows, q: g % rows, lastPass: (gEnd - 1) / rows, last: (gEnd - 1) % rows}
		}
		l, err := newLane(ctx, src.Engine, s, span, m.share(k)/float64(len(r.owned)), decoding)
		if err != nil {
			for _, l := range r.lanes {
				l.close()
			}
			clear(r.lanes)
			return fmt.Errorf("source %d split %d: %w", k, s, err)
		}
		r.lanes[[2]int{s, k}] = l
	}
	return nil
}

// Close stops the lanes' pipelines (waiting for what they have in flight)
// and releases what they hold. Cancel the context given to Open first.
func (r *MixRun) Close() {
	if r == nil {
		return
	}
	for _, l := range r.lanes {
		l.close()
	}
}

// Batches streams the rest of the run's epoch of the mix as record
// batches, in the rank's order; a batch is valid until the loop body
// returns. moved(split, to, next) is called before each batch is handed
// out, with where taking it leaves the position: the split's rows
// delivered and the round-robin's next split.
func (r *MixRun) Batches(ctx context.Context, moved func(split int, to int64, next int)) iter.Seq2[arrow.RecordBatch, error] {
	return func(yield func(arrow.RecordBatch, error) bool) {
		r.prime()
		nextChunk, stopChunks := iter.Pull2(r.buildStage(ctx))
		defer stopChunks()
		cur := map[int]*mixChunk{} // per split: the chunk its batches come from
		defer func() {
			for _, c := range cur {
				c.rec.Release()
			}
		}()
		for st := range r.order {
			s, from, to := st.split, st.from, st.to
			c := cur[s]
			if c == nil || from >= c.to {
				if c != nil {
					c.rec.Release()
					delete(cur, s)
				}
				got, err := r.nextChunk(ctx, nextChunk, st)
				if err != nil {
					yield(nil, err)
					return
				}
				c = got
				cur[s] = c
			}
			b := newSlice(c.rec, from-c.from, to-c.from)
			moved(s, to, st.next)
			ok := yield(b, nil)
			b.Release()
			if !ok {
				return
			}
		}
		if ctx.Err() != nil {
			yield(nil, ctx.Err())
		}
	}
}

// nextChunk takes the chunk that begins with batch st from the build
// stage, or says why there is none.
func (r *MixRun) nextChunk(ctx context.Context, next func() (*mixChunk, error, bool), st mixStep) (*mixChunk, error) {
	s, from, to := st.split, st.from, st.to
	got, err, ok := next()
	if err != nil {
		var ie *prefetch.ItemError
		for errors.As(err, &ie) {
			err = ie.Err
		}
		return nil, err
	}
	if !ok {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("stream: mix epoch %d split %d: internal error: no chunk holds rows [%d, %d)", r.epoch, s, from, to)
	}
	if got.split != s || got.from != from {
		got.rec.Release()
		return nil, fmt.Errorf("stream: mix epoch %d split %d: internal error: a chunk of split %d from row %d where rows from %d were due", r.epoch, s, got.split, got.from, from)
	}
	return got, nil
}

// prime starts every lane's pipeline at once (see mixLane.prime).
func (r *MixRun) prime() {
	var wg sync.WaitGroup
	for _, l := range r.lanes {
		wg.Go(l.prime)
	}
	wg.Wait()
}

// chunk is the rows of a chunk: a split's chunks start at its cursor and
// hold whole batches, so no batch spans two.
func (r *MixRun) chunk() int64 {
	batch := int64(r.m.BatchSize)
	return batch * max(1, r.m.ChunkRows/batch)
}

// order walks the rank's batches, round-robin over its mixed splits, from
// the position.
func (r *MixRun) order(yield func(mixStep) bool) {
	batch := int64(r.m.BatchSize)
	at := slices.Clone(r.cursors)
	owned := r.owned
	nx := r.next % max(len(owned), 1)
	for {
		found := false
		for range owned {
			s := owned[nx]
			nx = (nx + 1) % len(owned)
			if at[s] < r.lens[s] {
				from := at[s]
				at[s] = min(from+batch, r.lens[s])
				if !yield(mixStep{s, from, at[s], nx}) {
					return
				}
				found = true
				break
			}
		}
		if !found {
			return
		}
	}
}

// jobs is the chunks, in the order the batches first need them: for each,
// the walk says from which source each row comes, and each source's rows
// are the next ones of its lane (cut). This runs on one goroutine, in
// order; the lanes' pipelines read ahead on their own, and the chunks are
// put together concurrently (buildStage).
func (r *MixRun) jobs(yield func(*mixJob, error) bool) {
	chunk := r.chunk()
	end := slices.Clone(r.cursors) // per split: where its last chunk ends
	n := len(r.m.Sources)
	sc := &cutScratch{
		srcOf:  make([]int, chunk),
		counts: make([]int64, n),
		before: make([]int64, 0, n),
		at:     make([]cutRun, n),
	}
	for b := range r.order {
		s := b.split
		if b.from < end[s] {
			continue
		}
		j := &mixJob{split: s, from: b.from, to: min(b.from+chunk, r.lens[s])}
		end[s] = j.to
		if err := cut(j, r.walks[s], r.lanes, sc); err != nil {
			j.release()
			yield(nil, fmt.Errorf("stream: mix epoch %d split %d rows [%d, %d): %w", r.epoch, j.split, j.from, j.to, err))
			return
		}
		if !yield(j, nil) {
			return
		}
	}
}

// buildStage puts the chunks together (build) on Concurrency goroutines,
// up to Prefetch batches' worth ahead of the consumer.
func (r *MixRun) buildStage(ctx context.Context) iter.Seq2[*mixChunk, error] {
	return prefetch.Map(ctx, r.jobs, prefetch.Stage[*mixJob, *mixChunk]{
		Name:        "mix",
		Concurrency: r.m.Concurrency,
		Ahead:       max(1, int(int64(r.m.Prefetch)*int64(r.m.BatchSize)/r.chunk())),
		Fn: func(ctx context.Context, j *mixJob) (*mixChunk, error) {
			defer j.release()
			out, err := r.m.build(ctx, j)
			if err != nil {
				return nil, fmt.Errorf("stream: mix epoch %d split %d rows [%d, %d): %w", r.epoch, j.split, j.from, j.to, err)
			}
			return &mixChunk{split: j.split, from: j.from, to: j.to, rec: out}, nil
		},
		ReleaseIn:  func(j *mixJob) { j.release() },
		ReleaseOut: func(c *mixChunk) { c.rec.Release() },
	})
}

// mixJob is one chunk of the mix: positions [from, to) of one mixed
// split, and the runs of rows each source gives it (cut from the sources'
// lanes, in source order).
type mixJob struct {
	split    int
	from, to int64
	parts    []arrow.RecordBatch
	// src says, per row of the batch, which part and row of it the row is;
	// nil where the batch is the parts in order (a batch of one source).
	src []source
	// used is the rows of each part that src takes.
	used [][2]int32
	// runs is the runs of consecutive rows of one part in src.
	runs int
	// shared: the parts may be handed out as they are (they are not
	// slices of recycled buffers).
	shared bool
}

func (j *mixJob) release() {
	for _, p := range j.parts {
		p.Release()
	}
	j.parts = nil
	if src := j.src; src != nil {
		chunkSources.Put(&src)
		j.src = nil
	}
}

// chunkSources keeps chunks' src slices: a chunk's is 64 KiB, and made and
// zeroed afresh for each chunk it cost about 2 ns a row.
var chunkSources sync.Pool

// mixChunk is the rows [from, to) of a mixed split.
type mixChunk struct {
	split    int
	from, to int64
	rec      arrow.RecordBatch
}

// mixStep is a batch of the rank's order: rows [from, to) of a split, and
// the round-robin position after it.
type mixStep struct {
	split    int
	from, to int64
	next     int
}

// cut fills job j: it walks the job's positions, takes each source's rows
// from its lane as runs of consecutive rows, and, where the job mixes
// sources, says where each row of the batch is among the runs.
func cut(j *mixJob, w *permutation.MixWalk, lanes map[[2]int]*mixLane, sc *cutScratch) error {
	n := int(j.to - j.from)
	srcOf, counts, at := sc.srcOf, sc.counts, sc.at
	// Each source's rows in the chunk, from the walk's own counts: counting
	// srcOf cost 0.9 ns a row (an increment that waits on the one before
	// where a source repeats).
	sc.before = w.Taken(sc.before[:0])
	if got := w.NextSources(srcOf[:n]); got != n {
		return fmt.Errorf("internal error: the walk ended at %d", w.Pos())
	}
	for k, c := range w.Taken(counts[:0]) {
		counts[k] = c - sc.before[k]
	}
	used := 0
	for _, c := range counts {
		if c > 0 {
			used++
		}
	}
	for k, c := range counts {
		if c == 0 {
			continue
		}
		l := lanes[[2]int{j.split, k}]
		if l == nil {
			return fmt.Errorf("internal error: source %d has no rows in the split", k)
		}
		var err error
		if used == 1 {
			j.parts, err = l.take(c, j.parts)
			j.shared = !l.recycles()
		} else {
			j.parts, at[k], err = l.takeWhole(c, j.parts)
		}
		if err != nil {
			return fmt.Errorf("source %d: %w", k, err)
		}
	}
	if used > 1 {
		if p, ok := chunkSources.Get().(*[]source); ok && cap(*p) >= n {
			j.src = (*p)[:n]
		} else {
			j.src = make([]source, n)
		}
		j.used, j.runs = runSources(j.src, srcOf[:n], at, counts, j.parts)
	}
	return nil
}

// cutScratch is what cut reuses from one chunk to the next.
type cutScratch struct {
	srcOf          []int    // each row's source
	counts, before []int64  // per source: its rows in the chunk; its rows before it
	at             []cutRun // per source: where its rows begin among the parts
}

// runSources fills src with where each row of a batch is among the runs
// parts, given each row's source in srcOf, the rows each source gives in
// counts and where each source's rows begin in at: each source's rows are
// its parts' rows in order. It returns the rows [lo, hi) of each part the
// batch takes, and the runs of consecutive rows of one part in src.
func runSources(src []source, srcOf []int, at []cutRun, counts []int64, parts []arrow.RecordBatch) ([][2]int32, int) {
	used := make([][2]int32, len(parts))
	for k, c := range counts {
		for p := at[k]; c > 0; p.left = 0 { // each part to its end but the last
			if p.left == 0 {
				p.rec++
				p.row, p.left = 0, int32(parts[p.rec].NumRows())
			}
			n := min(c, int64(p.left))
			used[p.rec] = [2]int32{p.row, p.row + int32(n)}
			c -= n
		}
	}
	runs, last := 0, source{rec: -1}
	for i, k := range srcOf {
		p := &at[k]
		if p.left == 0 {
			p.rec++
			p.row, p.left = 0, int32(parts[p.rec].NumRows())
		}
		s := source{p.rec, p.row}
		if s.rec != last.rec || s.row != last.row+1 {
			runs++
		}
		src[i], last = s, s
		p.row++
		p.left--
	}
	return used, runs
}

// cutRun is where a source's next row is among a job's parts: part rec, row
// row, and left rows of the part after it.
type cutRun struct {
	rec, row, left int32
}

// build puts one chunk together from its runs: the one run as it is where
// the lane's buffers are not recycled, runs of one source concatenated, or
// the rows of several interleaved in the mix's order.
func (m *Mix) build(ctx context.Context, j *mixJob) (arrow.RecordBatch, error) {
	mem := m.Sources[0].Engine.opts.Allocator
	switch {
	case j.src == nil && len(j.parts) == 1 && j.shared:
		if p := j.parts[0]; !p.Schema().Equal(m.Schema) {
			// A source whose format says more of its columns than the mix
			// (Mix drops metadata the sources disagree on): the same
			// columns, under the mix's schema.
			return array.NewRecordBatch(m.Schema, p.Columns(), p.NumRows()), nil
		}
		j.parts[0].Retain()
		return j.parts[0], nil
	case j.src == nil:
		return concat(ctx, m.Schema, j.parts, mem)
	}
	return interleave(ctx, m.Schema, j.parts, j.src, j.used, j.runs, mem)
}
