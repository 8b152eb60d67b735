package engine

import (
	"slices"
	"sync"

	"github.com/sluicedata/sluice/checkpoint"
	"github.com/sluicedata/sluice/split"
)

// Bad rows a driver leaves out (a text format's BadRowsSkip) are counted
// per split, in the metrics and in the state, when the consumer finishes
// the window that held them: the window is the unit a resumed stream
// reads again, so a window finished before a state was taken is in its
// count and one the state resumes in the middle of is counted once it is
// finished after the resume, never twice. Which rows are bad depends on
// the data alone, so every epoch and every world size counts the same.

// skipCounts holds the bad rows of each decoded window whose count has not
// yet gone to its split: windows are decoded ahead of the consumer, in any
// order, by several goroutines. Only windows with bad rows have an entry.
type skipCounts struct {
	mu sync.Mutex
	m  map[split.WindowRef]int64
}

// record notes window r's bad rows; decoding the same window again (after
// a stop or an error) notes the same number.
func (k *skipCounts) record(r split.WindowRef, n int64) {
	if n <= 0 {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.m == nil {
		k.m = map[split.WindowRef]int64{}
	}
	k.m[r] = n
}

// take removes window r's count and returns it.
func (k *skipCounts) take(r split.WindowRef) int64 {
	k.mu.Lock()
	defer k.mu.Unlock()
	n := k.m[r]
	delete(k.m, r)
	return n
}

// reset forgets every window: the position moved to another epoch or
// state, whose windows are read again.
func (k *skipCounts) reset() {
	k.mu.Lock()
	k.m = nil
	k.mu.Unlock()
}

// finish counts the bad rows of split sp's windows that the consumer finishes
// by moving its cursor to window end (exclusive): every window from the
// cursor's, all decoded, since the schedule read each to cut the batch.
// It returns the rows added. e.mu is held.
func (e *Engine) finish(sp, end int) int64 {
	var n int64
	for w := e.cursors[sp].Window; w < end; w++ {
		n += e.skips.take(split.WindowRef{Split: sp, Window: w})
	}
	if n > 0 {
		if e.skipped == nil {
			e.skipped = make([]int64, e.opts.Order.NumSplits)
		}
		e.skipped[sp] += n
	}
	return n
}

// finishEpoch counts the windows left at the end of an epoch the consumer
// read to its end: those of trailing batches with no rows, which no taken
// batch moved the cursor past. e.mu is held.
func (e *Engine) finishEpoch() int64 {
	var n int64
	for _, s := range split.Owned(e.opts.Order.NumSplits, e.opts.Rank, e.opts.WorldSize) {
		n += e.finish(s, len(e.ep.Windows[s]))
	}
	return n
}

// SkippedRows is how many rows this rank's splits left out as bad in the
// windows the consumer finished, over every epoch of the job
// (stream.Dataset.SkippedRows).
func (e *Engine) SkippedRows() int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	var n int64
	for _, k := range e.skipped {
		n += k
	}
	return n
}

// skippedState is State.Skipped for this rank: nil while no split counted
// any. e.mu is held.
func (e *Engine) skippedState() []int64 {
	if !slices.ContainsFunc(e.skipped, func(n int64) bool { return n > 0 }) {
		return nil
	}
	return slices.Clone(e.skipped)
}

// loadSkipped takes the counts of this rank's splits from st. e.mu is
// held.
func (e *Engine) loadSkipped(st *checkpoint.State) {
	e.skipped = nil
	if st.Skipped == nil {
		return
	}
	e.skipped = make([]int64, e.opts.Order.NumSplits)
	for _, s := range split.Owned(e.opts.Order.NumSplits, e.opts.Rank, e.opts.WorldSize) {
		e.skipped[s] = st.Skipped[s]
	}
}
