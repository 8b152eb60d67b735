package engine

import (
	"context"
	"fmt"
	"iter"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/sluicedata/sluice/split"
)

// A lane streams one split of one source of a mix through the source's own
// pipeline (the one Batches runs: windows read whole, shuffled rows
// gathered out of them), pass after pass, so that the mix only has to cut
// runs of consecutive rows off each lane's batches. The lane is an engine
// that shares the source's plan and open files, as a consumer of
// Dataset.Consumers does, and owns the one split: it is rank s of a world of
// NumSplits.
type mixLane struct {
	e      *Engine
	split  int
	span   laneSpan
	next   func() (arrow.RecordBatch, error, bool)
	stop   func()
	cur    arrow.RecordBatch // a reference of our own; nil before the first
	off    int64             // rows of cur already taken
	primed *pull             // the first pull, made by prime; nil once taken
}

// laneSpan is what a lane gives of its split: the rows from offset q of
// the split's order in the source's epoch pass through offset last of its
// epoch lastPass. It is what the mix takes of the source in one of its
// epochs, and no more is read.
type laneSpan struct{ pass, q, lastPass, last int64 }

// laneBatchRows is the fewest rows of a lane's batches.
const laneBatchRows = 8192

// newLane makes source src's lane of split s, giving the rows of span.
// part is the part of src's concurrency and read-ahead bounds the lane
// gets (see Mix.share); decoding is the mix's decode slots, shared by its
// lanes.
func newLane(ctx context.Context, src *Engine, s int, span laneSpan, part float64, decoding chan struct{}) (*mixLane, error) {
	o := src.opts
	co := o.sharedOut(part)
	co.Limits.PrefetchWindows = laneWindows(o.Limits.PrefetchWindows, part)
	co.Rank, co.WorldSize = s, o.Order.NumSplits
	co.Epoch = span.pass
	// The mix cuts runs off the lane's batches, so their size is free:
	// larger ones cost fewer hand-offs per row.
	co.BatchSize = max(o.BatchSize, laneBatchRows)
	co.recyclePermuted, co.decoding = true, decoding
	c := newEngine(src.data, Plan{Chunks: src.chunks, ID: src.planID}, co)
	l := &mixLane{e: c, split: s, span: span}
	ep, err := l.epoch(span.pass)
	if err != nil {
		return nil, err
	}
	cursors := make([]split.Cursor, o.Order.NumSplits)
	if cursors[s], err = cursorAt(ep, s, span.q); err != nil {
		return nil, fmt.Errorf("epoch %d: %w", span.pass, err)
	}
	c.moveTo(ep, cursors, 0)
	l.next, l.stop = iter.Pull2(l.batches(ctx))
	return l, nil
}

// laneWindows is the windows a lane reads ahead of the mix, given its
// source's PrefetchWindows and its part of the source: the part rounded to
// the nearest, where other bounds are rounded down, and one at least. A
// lane's windows are taken at its source's share of the mix's rate, so the
// heaviest lane is the one the mix waits on: with its part rounded down, a
// half-weight source of three on two cores (1.5 windows of 3) read one
// window ahead, decoded each while the mix waited at the end of the one
// before, and the mix kept 1.84-1.86 cores busy against the single
// source's 1.89; with two, 1.88-1.89 (bench data, alternated runs).
func laneWindows(windows int, part float64) int {
	return max(1, int(float64(windows)*part+0.5+1e-9))
}

// epoch is the source's epoch pass as the lane reads it: in its last pass,
// the split's windows end with the one that holds the last row the lane
// gives. Past it, the pipeline would read ahead (and decode) windows of
// which the mix takes nothing this epoch.
func (l *mixLane) epoch(pass int64) (*split.Epoch, error) {
	ep, err := split.NewEpoch(l.e.chunks, l.e.opts.Order, pass)
	if err != nil {
		return nil, fmt.Errorf("epoch %d: %w", pass, err)
	}
	if pass == l.span.lastPass {
		w, _, err := ep.Seek(l.split, l.span.last)
		if err != nil {
			return nil, fmt.Errorf("epoch %d: %w", pass, err)
		}
		ep.Windows[l.split] = ep.Windows[l.split][:w.Window+1]
	}
	return ep, nil
}

// cursorAt is the cursor of split s after its first q rows.
func cursorAt(ep *split.Epoch, s int, q int64) (split.Cursor, error) {
	if q == ep.Splits[s].Rows {
		return split.Cursor{Window: len(ep.Windows[s]), Rows: q}, nil
	}
	w, within, err := ep.Seek(s, q)
	if err != nil {
		return split.Cursor{}, err
	}
	return split.Cursor{Window: w.Window, Offset: within, Rows: q}, nil
}

// batches is the lane's rows: the rest of its first pass, then the passes
// after, each the source's next epoch, through its last.
func (l *mixLane) batches(ctx context.Context) iter.Seq2[arrow.RecordBatch, error] {
	return func(yield func(arrow.RecordBatch, error) bool) {
		for pass := l.span.pass; pass <= l.span.lastPass; pass++ {
			if pass > l.span.pass {
				ep, err := l.epoch(pass)
				if err != nil {
					yield(nil, err)
					return
				}
				l.e.mu.Lock()
				l.e.moveTo(ep, make([]split.Cursor, l.e.opts.Order.NumSplits), 0)
				l.e.mu.Unlock()
			}
			for b, err := range l.e.Batches(ctx) {
				if err != nil {
					yield(nil, err)
					return
				}
				if !yield(b, nil) {
					return
				}
			}
		}
	}
}

// prime pulls the lane's first batch, which starts its pipeline. A lane's
// pipeline starts on its first pull, and the mix's first batch needs every
// lane's: pulled one after another, the lanes would read their first
// windows one after another, so the mix primes them all at once.
func (l *mixLane) prime() {
	b, err, ok := l.next()
	if ok && err == nil {
		b.Retain() // the pipeline's until the next pull: hold it
	}
	l.primed = &pull{b, err, ok}
}

// pull is a batch a lane was given by its pipeline.
type pull struct {
	b   arrow.RecordBatch
	err error
	ok  bool
}

// load moves the lane on to its next batch, the primed one first; want is
// the rows still wanted, for the error where there are none.
func (l *mixLane) load(want int64) error {
	if l.cur != nil {
		l.cur.Release()
		l.cur = nil
	}
	p := l.primed
	if p != nil {
		l.primed = nil
	} else {
		b, err, ok := l.next()
		if ok && err == nil {
			b.Retain() // the pipeline's until the next pull: hold it
		}
		p = &pull{b, err, ok}
	}
	if p.err != nil {
		return p.err
	}
	if !p.ok {
		return fmt.Errorf("internal error: the source ran out %d rows short", want)
	}
	l.cur, l.off = p.b, 0
	return nil
}

// take appends zero-copy slices holding the lane's next n rows to out; the
// caller owns them.
func (l *mixLane) take(n int64, out []arrow.RecordBatch) ([]arrow.RecordBatch, error) {
	for n > 0 {
		if l.cur == nil || l.off == l.cur.NumRows() {
			if err := l.load(n); err != nil {
				return out, err
			}
			continue
		}
		k := min(n, l.cur.NumRows()-l.off)
		out = append(out, newSlice(l.cur, l.off, l.off+k))
		l.off += k
		n -= k
	}
	return out, nil
}

// takeWhole is take for a batch that interleaves sources: it appends the
// lane's batches that hold its next n rows whole (a reference each, the
// caller's), and returns where the rows begin in them: the first batch
// appended, the row in it, and the rows of it from there. Slicing would
// cost a record, arrays and their data per run, more than the gather
// that reads them by row number anyway.
func (l *mixLane) takeWhole(n int64, out []arrow.RecordBatch) ([]arrow.RecordBatch, cutRun, error) {
	at := cutRun{rec: -1}
	for n > 0 {
		if l.cur == nil || l.off == l.cur.NumRows() {
			if err := l.load(n); err != nil {
				return out, at, err
			}
			continue
		}
		if at.rec < 0 {
			at = cutRun{rec: int32(len(out)), row: int32(l.off), left: int32(l.cur.NumRows() - l.off)}
		}
		k := min(n, l.cur.NumRows()-l.off)
		l.cur.Retain()
		out = append(out, l.cur)
		l.off += k
		n -= k
	}
	return out, at, nil
}

// recycles reports whether the lane's batches are slices of recycled
// buffers (a shuffled source's permuted windows), which no batch the mix
// hands out may be.
func (l *mixLane) recycles() bool { return l.e.opts.Order.Shuffle && !l.e.opts.NoRecycle }

// close stops the lane's pipeline (waiting for what it has in flight) and
// releases what it holds.
func (l *mixLane) close() {
	if l.cur != nil {
		l.cur.Release()
		l.cur = nil
	}
	if p := l.primed; p != nil && p.ok && p.err == nil {
		p.b.Release()
	}
	l.primed = nil
	l.stop()
	l.e.Close()
}
