package stream

import (
	"context"
	"fmt"
	"iter"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/sluicedata/sluice/metrics"
	"github.com/sluicedata/sluice/plan"
)

// A lane streams one split of one source of a mix through the source's own
// pipeline (the one Batches runs: windows read whole, shuffled rows
// gathered out of them), pass after pass, so that the mix only has to cut
// runs of consecutive rows off each lane's batches. The lane is a dataset
// that shares the source's plan and open files, as a StreamingSplit
// consumer does, and owns the one split: it is rank s of a world of
// NumSplits.
type mixLane struct {
	d      *Dataset
	repeat bool
	next   func() (arrow.RecordBatch, error, bool)
	stop   func()
	cur    arrow.RecordBatch // a reference of our own; nil before the first
	off    int64             // rows of cur already taken
}

// laneBatchRows is the fewest rows of a lane's batches.
const laneBatchRows = 8192

// newLane makes source d's lane of split s, starting at offset q of the
// split's order in epoch pass. lanes is how many lanes of d the mix runs at
// once: d's concurrency and prefetch bounds are shared out among them, so
// that the mix holds what d alone would.
func newLane(ctx context.Context, d *Dataset, s int, pass, q int64, lanes int, repeat bool) (*mixLane, error) {
	o := d.opts
	co := o
	co.Rank, co.WorldSize = s, o.NumSplits
	co.Epoch = pass
	co.FetchConcurrency = max(1, o.FetchConcurrency/lanes)
	co.ReadConcurrency = max(1, o.ReadConcurrency/lanes)
	co.TransformConcurrency = max(1, o.TransformConcurrency/lanes)
	co.PrefetchBatches = max(1, o.PrefetchBatches/lanes)
	co.PrefetchWindows = max(1, o.PrefetchWindows/lanes)
	co.PrefetchBytes = o.PrefetchBytes / int64(lanes)
	if o.PrefetchBytes > 0 {
		co.PrefetchBytes = max(1, co.PrefetchBytes)
	}
	co.Metrics = metrics.New()
	// The mix cuts runs off the lane's batches, so their size is free:
	// larger ones cost fewer hand-offs per row.
	co.BatchSize = max(o.BatchSize, laneBatchRows)
	c := &Dataset{opts: co, data: d.data, chunks: d.chunks, planID: d.planID, shared: true}
	ep, err := plan.NewEpoch(d.chunks, co.order(), pass)
	if err != nil {
		return nil, fmt.Errorf("epoch %d: %w", pass, err)
	}
	cursors := make([]plan.Cursor, o.NumSplits)
	if cursors[s], err = cursorAt(ep, s, q); err != nil {
		return nil, fmt.Errorf("epoch %d: %w", pass, err)
	}
	c.moveTo(ep, cursors, 0)
	l := &mixLane{d: c, repeat: repeat}
	l.next, l.stop = iter.Pull2(l.batches(ctx))
	return l, nil
}

// cursorAt is the cursor of split s after its first q rows.
func cursorAt(ep *plan.Epoch, s int, q int64) (plan.Cursor, error) {
	if q == ep.Splits[s].Rows {
		return plan.Cursor{Window: len(ep.Windows[s]), Rows: q}, nil
	}
	w, within, err := ep.Seek(s, q)
	if err != nil {
		return plan.Cursor{}, err
	}
	return plan.Cursor{Window: w.Window, Offset: within, Rows: q}, nil
}

// batches is the lane's rows: the rest of its pass, then (with repeat) the
// passes after, each the source's next epoch.
func (l *mixLane) batches(ctx context.Context) iter.Seq2[arrow.RecordBatch, error] {
	return func(yield func(arrow.RecordBatch, error) bool) {
		for {
			n := 0
			for b, err := range l.d.Batches(ctx) {
				if err != nil {
					yield(nil, err)
					return
				}
				n++
				if !yield(b, nil) {
					return
				}
			}
			// A pass with no batch at all is an empty split: repeating it
			// would spin for ever.
			if !l.repeat || (n == 0 && l.d.Splits()[l.d.opts.Rank].Rows == 0) {
				return
			}
		}
	}
}

// take appends zero-copy slices holding the lane's next n rows to out; the
// caller owns them.
func (l *mixLane) take(n int64, out []arrow.RecordBatch) ([]arrow.RecordBatch, error) {
	for n > 0 {
		if l.cur == nil || l.off == l.cur.NumRows() {
			if l.cur != nil {
				l.cur.Release()
				l.cur = nil
			}
			b, err, ok := l.next()
			if err != nil {
				return out, err
			}
			if !ok {
				return out, fmt.Errorf("internal error: the source ran out %d rows short", n)
			}
			// The batch is the pipeline's until the next pull: hold it.
			b.Retain()
			l.cur, l.off = b, 0
			continue
		}
		k := min(n, l.cur.NumRows()-l.off)
		out = append(out, l.cur.NewSlice(l.off, l.off+k))
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
			if l.cur != nil {
				l.cur.Release()
				l.cur = nil
			}
			b, err, ok := l.next()
			if err != nil {
				return out, at, err
			}
			if !ok {
				return out, at, fmt.Errorf("internal error: the source ran out %d rows short", n)
			}
			b.Retain()
			l.cur, l.off = b, 0
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

// close stops the lane's pipeline (waiting for what it has in flight) and
// releases what it holds.
func (l *mixLane) close() {
	if l.cur != nil {
		l.cur.Release()
		l.cur = nil
	}
	l.stop()
	l.d.Close()
}
