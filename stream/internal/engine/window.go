package engine

import (
	"context"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/sluicedata/sluice/formats"
	"github.com/sluicedata/sluice/split"
)

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

// reorder puts a decoded window's rows in its shuffled order, once, column by
// column, so that its batches are slices of it as in storage order.
//
// Gathering each batch from the window instead reads every column of the
// window at random for each batch: a window larger than the core's cache
// (a 131,072-row group of five columns is 7 MB) then pays a cache miss for
// nearly every value. One column at a time, the column's values stay in
// cache for the whole pass (1 MB for 131,072 int64s), and the gathers run
// on the decode goroutines, beside the decoding that made the window.
//
// order may also name some of the rows only (a window of passes, whose
// pieces decode rows of other passes too): those are dropped. The columns
// are gathered on up to workers goroutines.
func (w *window) reorder(ctx context.Context, schema *arrow.Schema, order []int32, mem memory.Allocator, workers int) error {
	w.order = order
	plan := newPermutePlan
	if int64(len(order)) != w.rows {
		plan = func(w *window, order []int32) *gatherPlan { return newGatherPlan([]gatherPart{{w, order}}) }
	}
	rec, err := gatherOn(ctx, schema, plan(w, order), mem, workers)
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
	w.rows = rec.NumRows()
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
