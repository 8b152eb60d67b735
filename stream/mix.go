package stream

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"iter"
	"math"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/sluicedata/sluice/checkpoint"
	"github.com/sluicedata/sluice/permutation"
	"github.com/sluicedata/sluice/prefetch"
	"github.com/sluicedata/sluice/split"
)

// A mix interleaves several datasets by weight (permutation.Mix says
// how): mixed split s takes its rows from split s of every source, so the
// sources must have the same NumSplits, and what a mixed split emits is a
// pure function of the seed, the epoch, the weights and the sources' plans
// and order options, whatever the world size. A rank takes its mixed
// splits round-robin, BatchSize rows at a time, as it takes a dataset's.
//
// A mix reads each source the way Batches reads a dataset: split s of
// source k is streamed by the source's own pipeline (windows read whole,
// shuffled rows gathered out of them), pass after pass, in a lane of its
// own (mixlane.go). The mixer decides, for each chunk of a split (several
// batches), how many rows each source gives it (permutation.Mix's closed-form
// counts), cuts runs of that many consecutive rows off the sources' lanes,
// gathers them into the mix's order, and hands the chunk out as batches
// sliced off it. Each source's own options (concurrency, prefetch bounds) are
// shared out among its lanes, each lane given the source's share of the
// mix over the rank's mixed splits (see share), and all the lanes decode
// no more windows at once than one source would (see decodeSlots).

// MixSource is one dataset of a mix.
type MixSource struct {
	// Dataset is the source, opened with its own URLs, format, columns and
	// order options; every source's schema must be the same. Its own
	// position, Rank and WorldSize are not used: the mix has its own.
	Dataset *Dataset
	// Weight is the source's share of the mix, relative to the others'.
	Weight float64
}

// MixOptions configure a mix. The zero value of every field is a documented
// default.
type MixOptions struct {
	// Epoch says how long an epoch of the mix is when sources differ in
	// size. Default permutation.MixLargest: long enough for every source to be seen
	// once at its weight (the source with the most rows per unit of weight
	// makes one pass, the others more). permutation.MixSmallest ends the epoch when
	// the first source completes a pass; permutation.MixRows makes it Rows rows.
	Epoch permutation.MixEpoch
	// Rows is the rows of a permutation.MixRows epoch.
	Rows int64
	// NoRepeat gives each source at most one pass per epoch (the source's
	// epoch numbered as the mix's): a source that runs out leaves the rest
	// of the epoch to the others, whose shares then grow. Default off: a
	// source that runs out goes on with its next pass, its next epoch (a
	// new shuffle where it shuffles), and passes run on from one epoch of
	// the mix to the next, so proportions hold throughout.
	NoRepeat bool
	// Seed draws the interleaving. Default 0.
	Seed uint64
	// Epoch the mix starts at. Default 0.
	StartEpoch int64
	// BatchSize is the rows of a batch; a batch never mixes splits.
	// Default 1024.
	BatchSize int
	// Rank and WorldSize: rank r takes the mixed splits s with s mod
	// WorldSize == r. Defaults 0 and 1.
	Rank, WorldSize int
	// Concurrency is the number of chunks (8,192 rows of a split, or one
	// batch where batches are larger) put together at once out of the
	// runs the sources give them. Default max(1, GOMAXPROCS/4): putting a
	// chunk together costs about an eighth of decoding its rows, and more
	// builders than that only crowd the decoders' caches (on two cores,
	// two builders cost the mix 2-3% more CPU than one).
	Concurrency int
	// Prefetch is the batches put together ahead of the consumer, counted
	// in whole chunks, one at least. Default 2 × Concurrency.
	Prefetch int
}

// Mixed is a mix of datasets with a position. Its methods are safe to call
// from several goroutines, but only one iteration runs at a time.
type Mixed struct {
	sources []MixSource
	o       MixOptions
	mix     *permutation.Mix
	schema  *arrow.Schema
	order   permutation.MixOrder
	finger  string
	splits  int
	rows    [][]int64 // per source and split: the rows of a pass

	mu      sync.Mutex // guards the position and mix (its epoch starts)
	running bool
	epoch   int64
	cursors []int64 // per mixed split: rows delivered this epoch
	next    int
	// ahead holds the rank's mixed splits that are in a later epoch than
	// epoch, by split, as a dataset's aheadCursor does; their cursors are
	// at epoch's end. nil where none is.
	ahead map[int]mixAhead
}

// mixAhead is a mixed split's position in a later epoch than the mix's.
type mixAhead struct {
	epoch, cursor int64
}

// enterEpoch moves the mix to epoch e: the splits ahead holds in e resume
// where they stand, those in later epochs wait at e's end, the others
// start. m.mu is held.
func (m *Mixed) enterEpoch(e int64) {
	m.epoch, m.cursors, m.next = e, make([]int64, m.splits), 0
	for s, a := range m.ahead {
		if a.epoch == e {
			m.cursors[s] = a.cursor
			delete(m.ahead, s)
		} else {
			m.cursors[s] = m.mix.Len(e, s)
		}
	}
	if len(m.ahead) == 0 {
		m.ahead = nil
	}
}

// Mix opens a mix of the sources. Sources whose schemas differ, whose
// NumSplits differ, whose counts are not known before reading (text
// files, a filter: split.ErrUnknownRows), or that hold no rows (ErrEmpty:
// no order gives them their weight) are refused.
func Mix(sources []MixSource, o MixOptions) (*Mixed, error) {
	if len(sources) == 0 {
		return nil, errors.New("stream: mix of no sources")
	}
	if o.BatchSize == 0 {
		o.BatchSize = 1024
	}
	if o.WorldSize == 0 {
		o.WorldSize = 1
	}
	if o.Concurrency == 0 {
		o.Concurrency = max(1, runtime.GOMAXPROCS(0)/4)
	}
	if o.Prefetch == 0 {
		o.Prefetch = 2 * o.Concurrency
	}
	first := sources[0].Dataset
	if first == nil {
		return nil, errors.New("stream: mix source 0 has no dataset")
	}
	n := first.opts.NumSplits
	switch {
	case o.BatchSize < 0 || o.Concurrency < 0 || o.Prefetch < 0:
		return nil, errors.New("stream: mix BatchSize, Concurrency and Prefetch must not be negative")
	case o.WorldSize < 0 || o.Rank < 0 || o.Rank >= o.WorldSize:
		return nil, fmt.Errorf("stream: mix Rank %d is outside WorldSize %d", o.Rank, o.WorldSize)
	case n%o.WorldSize != 0:
		return nil, fmt.Errorf("stream: mix: the sources' NumSplits %d is not a multiple of WorldSize %d", n, o.WorldSize)
	case o.StartEpoch < 0:
		return nil, fmt.Errorf("stream: mix StartEpoch %d must not be negative", o.StartEpoch)
	}
	m := &Mixed{sources: slices.Clone(sources), o: o, schema: first.Schema(), splits: n}
	m.order = permutation.MixOrder{Seed: o.Seed, Epoch: o.Epoch, Rows: o.Rows, Repeat: !o.NoRepeat, NumSplits: n}
	rows := make([][]int64, len(sources))
	h := sha256.New()
	fmt.Fprintf(h, "mix %d %d %d %t %d\n", o.Seed, o.Epoch, o.Rows, o.NoRepeat, n)
	for k, src := range sources {
		d := src.Dataset
		if d == nil {
			return nil, fmt.Errorf("stream: mix source %d has no dataset", k)
		}
		if d.opts.EqualBatches {
			// The mix deals its own batches to its ranks; a source's option
			// would promise an equality it does not keep.
			return nil, fmt.Errorf("stream: mix source %d has Options.EqualBatches, which a mix does not apply: its ranks take the mix's batches, not the source's", k)
		}
		if d.opts.NumSplits != n {
			return nil, fmt.Errorf("stream: mix source %d has NumSplits %d, source 0 has %d: every source needs the same", k, d.opts.NumSplits, n)
		}
		if !d.Schema().Equal(m.schema) {
			return nil, fmt.Errorf("stream: mix source %d's schema %v differs from source 0's %v: select the same columns, of the same types", k, d.Schema(), m.schema)
		}
		ep, err := d.takeEpoch(0)
		if err != nil {
			return nil, fmt.Errorf("stream: mix source %d: %w", k, err)
		}
		rows[k] = make([]int64, n)
		var total int64
		for s, sp := range ep.Splits {
			rows[k][s] = sp.Rows
			total += max(sp.Rows, 0)
		}
		if total == 0 && !slices.Contains(rows[k], -1) { // unknown counts: permutation.NewMix says so
			// No interleaving gives an empty source its share.
			return nil, fmt.Errorf("stream: mix source %d (%s): %w: its weight %v cannot be honoured; leave it out of the mix", k, d.describeURLs(), ErrEmpty, src.Weight)
		}
		m.order.Weights = append(m.order.Weights, src.Weight)
		fmt.Fprintf(h, "source %d %s %x\n", k, d.orderState().Fingerprint, math.Float64bits(src.Weight))
	}
	mix, err := permutation.NewMix(m.order, rows)
	if err != nil {
		return nil, fmt.Errorf("stream: mix: %w", err)
	}
	m.mix, m.rows = mix, rows
	m.finger = hex.EncodeToString(h.Sum(nil)[:16])
	m.epoch = o.StartEpoch
	m.cursors = make([]int64, n)
	return m, nil
}

// Schema is the schema of every batch.
func (m *Mixed) Schema() *arrow.Schema { return m.schema }

// Epoch is the epoch the next batch comes from.
func (m *Mixed) Epoch() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.epoch
}

// SplitRows is the rows mixed split s holds in epoch.
func (m *Mixed) SplitRows(epoch int64, split int) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.mix.Len(epoch, split)
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

// Batches streams the rest of the current epoch of the mix as Arrow record
// batches, in this rank's order. A batch is valid until the loop body
// returns. When the epoch is exhausted the mix moves to the next one;
// breaking out keeps the position. The first error ends the iteration.
func (m *Mixed) Batches(ctx context.Context) iter.Seq2[arrow.RecordBatch, error] {
	return func(yield func(arrow.RecordBatch, error) bool) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		m.mu.Lock()
		if m.running {
			m.mu.Unlock()
			yield(nil, ErrBusy)
			return
		}
		m.running = true
		epoch, cursors, next := m.epoch, slices.Clone(m.cursors), m.next
		owned := split.Owned(m.splits, m.o.Rank, m.o.WorldSize)
		lens := make([]int64, m.splits)
		walks := map[int]*permutation.MixWalk{}
		lanes := map[[2]int]*mixLane{} // by (split, source)
		var err error
		decoding := make(chan struct{}, m.decodeSlots())
		for _, s := range owned {
			lens[s] = m.mix.Len(epoch, s)
			if walks[s], err = m.mix.Walk(epoch, s, cursors[s]); err != nil {
				break
			}
			if err = m.openLanes(ctx, lanes, epoch, s, cursors[s], len(owned), decoding); err != nil {
				break
			}
		}
		m.mu.Unlock()
		if err == nil {
			// Every lane's pipeline starts at once (see prime).
			var wg sync.WaitGroup
			for _, l := range lanes {
				wg.Go(l.prime)
			}
			wg.Wait()
		}
		defer func() {
			// The producer has returned (Map waits for it), so the lanes
			// are no one else's now.
			cancel()
			for _, l := range lanes {
				l.close()
			}
			m.mu.Lock()
			m.running = false
			m.mu.Unlock()
		}()
		if err != nil {
			yield(nil, fmt.Errorf("stream: mix epoch %d: %w", epoch, err))
			return
		}

		// A split's chunks start at its cursor and hold whole batches, so
		// no batch spans two.
		batch := int64(m.o.BatchSize)
		chunk := batch * max(1, chunkRows/batch)
		// order walks the rank's batches, round-robin over its mixed
		// splits, from the position.
		order := func(yield func(mixStep) bool) {
			at := slices.Clone(cursors)
			nx := next % max(len(owned), 1)
			for {
				found := false
				for range owned {
					s := owned[nx]
					nx = (nx + 1) % len(owned)
					if at[s] < lens[s] {
						from := at[s]
						at[s] = min(from+batch, lens[s])
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

		// The chunks, in the order the batches first need them: for each,
		// the walk says from which source each row comes, and each source's
		// rows are the next ones of its lane. This runs on one goroutine, in
		// order; the lanes' pipelines read ahead on their own, and the
		// chunks are put together concurrently.
		plans := func(yield func(*mixJob, error) bool) {
			end := slices.Clone(cursors) // per split: where its last chunk ends
			sc := &cutScratch{
				srcOf:  make([]int, chunk),
				counts: make([]int64, len(m.sources)),
				before: make([]int64, 0, len(m.sources)),
				at:     make([]cutRun, len(m.sources)),
			}
			for b := range order {
				s := b.split
				if b.from < end[s] {
					continue
				}
				j := &mixJob{split: s, from: b.from, to: min(b.from+chunk, lens[s])}
				end[s] = j.to
				if err := m.cut(j, walks[s], lanes, sc); err != nil {
					j.release()
					yield(nil, fmt.Errorf("stream: mix epoch %d split %d rows [%d, %d): %w", epoch, j.split, j.from, j.to, err))
					return
				}
				if !yield(j, nil) {
					return
				}
			}
		}
		built := prefetch.Map(ctx, plans, prefetch.Stage[*mixJob, *mixChunk]{
			Name:        "mix",
			Concurrency: m.o.Concurrency,
			Ahead:       max(1, int(int64(m.o.Prefetch)*batch/chunk)),
			Fn: func(ctx context.Context, j *mixJob) (*mixChunk, error) {
				defer j.release()
				out, err := m.build(ctx, j)
				if err != nil {
					return nil, fmt.Errorf("stream: mix epoch %d split %d rows [%d, %d): %w", epoch, j.split, j.from, j.to, err)
				}
				return &mixChunk{split: j.split, from: j.from, to: j.to, rec: out}, nil
			},
			ReleaseIn:  func(j *mixJob) { j.release() },
			ReleaseOut: func(c *mixChunk) { c.rec.Release() },
		})
		nextChunk, stopChunks := iter.Pull2(built)
		defer stopChunks()
		cur := map[int]*mixChunk{} // per split: the chunk its batches come from
		defer func() {
			for _, c := range cur {
				c.rec.Release()
			}
		}()
		for st := range order {
			s, from, to := st.split, st.from, st.to
			c := cur[s]
			if c == nil || from >= c.to {
				if c != nil {
					c.rec.Release()
					delete(cur, s)
				}
				got, err, ok := nextChunk()
				if err != nil {
					var ie *prefetch.ItemError
					for errors.As(err, &ie) {
						err = ie.Err
					}
					yield(nil, err)
					return
				}
				if !ok {
					if err := ctx.Err(); err != nil {
						yield(nil, err)
					} else {
						yield(nil, fmt.Errorf("stream: mix epoch %d split %d: internal error: no chunk holds rows [%d, %d)", epoch, s, from, to))
					}
					return
				}
				if got.split != s || got.from != from {
					got.rec.Release()
					yield(nil, fmt.Errorf("stream: mix epoch %d split %d: internal error: a chunk of split %d from row %d where rows from %d were due", epoch, s, got.split, got.from, from))
					return
				}
				c = got
				cur[s] = c
			}
			b := c.rec.NewSlice(from-c.from, to-c.from)
			m.mu.Lock()
			m.cursors[s] = to
			m.next = st.next
			m.mu.Unlock()
			ok := yield(b, nil)
			b.Release()
			if !ok {
				return
			}
		}
		if ctx.Err() != nil {
			yield(nil, ctx.Err())
			return
		}
		m.mu.Lock()
		m.enterEpoch(epoch + 1)
		m.mu.Unlock()
	}
}

// chunkRows is about the rows of a chunk: the mix puts its rows together
// a chunk of several batches at a time, and hands out each batch as a
// slice of its chunk, as a shuffled dataset slices its permuted windows:
// per batch, the hand-offs between goroutines and the making of a batch's
// buffers and plan cost as much again as the copy of 1,024 rows.
var chunkRows int64 = 8192 // a variable for tests

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

// openLanes opens the lanes of mixed split s, each source's where the mix's
// position (cursor rows of the split in epoch) leaves it: its pass and
// offset follow from the closed-form counts; decoding is the lanes' decode
// slots. m.mu is held.
func (m *Mixed) openLanes(ctx context.Context, lanes map[[2]int]*mixLane, epoch int64, s int, cursor int64, splits int, decoding chan struct{}) error {
	counts := m.mix.Counts(epoch, s, cursor)
	end := m.mix.Counts(epoch, s, m.mix.Len(epoch, s))
	start := m.mix.Start(epoch, s)
	for k, src := range m.sources {
		r := m.rows[k][s]
		if r == 0 || end[k] == counts[k] {
			continue // the rest of the epoch takes nothing of it
		}
		// The rows it gives: from counts[k] to end[k] of its rows in the
		// mix, in its passes.
		pass, q, lastPass, last := epoch, counts[k], epoch, end[k]-1
		if !m.o.NoRepeat {
			g, gEnd := start[k]+counts[k], start[k]+end[k]
			pass, q, lastPass, last = g/r, g%r, (gEnd-1)/r, (gEnd-1)%r
		}
		l, err := newLane(ctx, src.Dataset, s, pass, q, lastPass, last, m.share(k)/float64(splits), decoding)
		if err != nil {
			for _, l := range lanes {
				l.close()
			}
			clear(lanes)
			return fmt.Errorf("source %d split %d: %w", k, s, err)
		}
		lanes[[2]int{s, k}] = l
	}
	return nil
}

// decodeSlots is how many windows the mix's lanes decode at once, all
// sources together: as many as the most concurrent source decodes alone.
// Each lane has decoders of its own (its share of its source's), and
// there are more lanes than cores; left to run at once, they take turns
// on the cores mid-window, each turn finding the caches full of another
// window's columns: an epoch of the bench's three sources cost 1-3% more
// CPU and about 2% more time than with the slots (alternated runs).
func (m *Mixed) decodeSlots() int {
	n := 1
	for _, s := range m.sources {
		n = max(n, s.Dataset.opts.ReadConcurrency)
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
func (m *Mixed) share(k int) float64 {
	var sum float64
	for _, s := range m.sources {
		sum += s.Weight
	}
	return m.sources[k].Weight / sum
}

// cut fills job j: it walks the job's positions, takes each source's rows
// from its lane as runs of consecutive rows, and, where the job mixes
// sources, says where each row of the batch is among the runs.
func (m *Mixed) cut(j *mixJob, w *permutation.MixWalk, lanes map[[2]int]*mixLane, sc *cutScratch) error {
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
func (m *Mixed) build(ctx context.Context, j *mixJob) (arrow.RecordBatch, error) {
	mem := m.sources[0].Dataset.opts.Allocator
	switch {
	case j.src == nil && len(j.parts) == 1 && j.shared:
		j.parts[0].Retain()
		return j.parts[0], nil
	case j.src == nil:
		return concat(m.schema, j.parts, mem)
	}
	return interleave(ctx, m.schema, j.parts, j.src, j.used, j.runs, mem)
}

// MixState is a mix's position; see checkpoint.MixState. A
// MixCheckpointer saves it in a checkpoint store.
type MixState = checkpoint.MixState

// StateDict returns the mix's position: the rows the consumer has taken.
// Taken after the loop ended, it is at the start of the next epoch; the
// states of all ranks merge whatever each rank's epoch (see
// checkpoint.MergeMix).
func (m *Mixed) StateDict() MixState {
	m.mu.Lock()
	defer m.mu.Unlock()
	st := MixState{Version: checkpoint.MixStateVersion, Fingerprint: m.finger, Epoch: m.epoch, NumSplits: m.splits,
		WorldSize: m.o.WorldSize, Rank: m.o.Rank, Cursors: slices.Clone(m.cursors), Next: m.next}
	if m.ahead != nil {
		epochs := make([]int64, m.splits)
		for s := range epochs {
			epochs[s] = m.epoch
		}
		for s, a := range m.ahead {
			epochs[s], st.Cursors[s] = a.epoch, a.cursor
		}
		st.SetEpochs(epochs)
	}
	st.Taken = m.taken(st.SplitEpoch, st.Cursors, split.Owned(m.splits, m.o.Rank, m.o.WorldSize))
	return st
}

// taken is each source's cursor per split at the given position (each
// split in epochOf(split)); m.mu is held.
func (m *Mixed) taken(epochOf func(int) int64, cursors []int64, splits []int) [][]int64 {
	out := make([][]int64, len(m.sources))
	for k := range out {
		out[k] = make([]int64, m.splits)
	}
	for _, s := range splits {
		epoch := epochOf(s)
		counts := m.mix.Counts(epoch, s, cursors[s])
		base := m.mix.Start(epoch, s)
		for k := range out {
			out[k][s] = base[k] + counts[k]
		}
	}
	return out
}

// LoadStateDict moves the mix to a saved position: its own rank's state at
// the same world size, or a merged one (MergeMixStates) at any world size
// that divides NumSplits. A state of another mix is refused (wrapping
// checkpoint.ErrMismatch). Where the state's splits are in different
// epochs (a merge at an epoch's boundary), the mix is at the state's Epoch,
// the least of the ranks', and each split in a later one resumes when it
// comes, as Dataset.LoadStateDict does.
func (m *Mixed) LoadStateDict(st MixState) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.running {
		return ErrBusy
	}
	if err := st.Validate(); err != nil {
		return fmt.Errorf("stream: load mix state: %w", err)
	}
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("stream: load mix state: %w: field %s: %s", checkpoint.ErrMismatch, field, fmt.Sprintf(format, args...))
	}
	switch {
	case st.Fingerprint != m.finger:
		return bad("fingerprint", "the state is of another mix (sources, weights or options differ)")
	case st.NumSplits != m.splits || len(st.Cursors) != m.splits:
		return bad("cursors", "%d splits, the mix has %d", len(st.Cursors), m.splits)
	case len(st.Taken) != len(m.sources):
		return bad("taken", "%d sources, the mix has %d", len(st.Taken), len(m.sources))
	case st.Rank >= 0 && (st.WorldSize != m.o.WorldSize || st.Rank != m.o.Rank):
		return bad("rank", "the state is rank %d of %d, the mix rank %d of %d; merge all ranks' states (MergeMixStates) to change world size", st.Rank, st.WorldSize, m.o.Rank, m.o.WorldSize)
	}
	owned := split.Owned(m.splits, m.o.Rank, m.o.WorldSize)
	e := st.Epoch
	for _, s := range owned {
		if c, n := st.Cursors[s], m.mix.Len(st.SplitEpoch(s), s); c < 0 || c > n {
			return bad("cursors", "split %d at %d of its %d rows in epoch %d", s, c, n, st.SplitEpoch(s))
		}
	}
	want := m.taken(st.SplitEpoch, st.Cursors, owned)
	for k := range want {
		for _, s := range owned {
			if st.Taken[k][s] != want[k][s] {
				return bad("taken", "source %d split %d does not match the cursors", k, s)
			}
		}
	}
	cursors := make([]int64, m.splits)
	var ahead map[int]mixAhead
	for _, s := range owned {
		if se := st.SplitEpoch(s); se > e {
			if ahead == nil {
				ahead = map[int]mixAhead{}
			}
			ahead[s] = mixAhead{epoch: se, cursor: st.Cursors[s]}
			cursors[s] = m.mix.Len(e, s)
			continue
		}
		cursors[s] = st.Cursors[s]
	}
	m.epoch, m.cursors, m.next, m.ahead = e, cursors, 0, ahead
	if st.Rank >= 0 {
		m.next = st.Next
	}
	return nil
}

// MergeMixStates merges the states all ranks of a mix saved at one step
// into one that any world size dividing NumSplits resumes (see
// checkpoint.MergeMix).
func MergeMixStates(states ...MixState) (MixState, error) {
	st, err := checkpoint.MergeMix(states...)
	if err != nil {
		return MixState{}, fmt.Errorf("stream: %w", err)
	}
	return st, nil
}

// describeURLs names what d was opened on, for errors: its URLs (the
// first three), else the version its planner gave (an Iceberg table's).
func (d *Dataset) describeURLs() string {
	switch urls := d.opts.URLs; {
	case len(urls) > 3:
		return fmt.Sprintf("%s and %d more", strings.Join(urls[:3], ", "), len(urls)-3)
	case len(urls) > 0:
		return strings.Join(urls, ", ")
	case d.data.Version != "":
		return d.data.Version
	}
	return "planned by Options.Plan"
}
