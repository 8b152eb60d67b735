package engine

import (
	"context"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// interleave builds the batch whose row i is row src[i].row of
// parts[src[i].rec]: the mix's rows put together from the runs its sources
// gave (runs of them in src, counted as src was made). The runs are read in
// order, so unlike a shuffled window's gather nothing is searched and the
// reads stay in cache; runs long enough move as one copy each, as in a
// window's gather. Column types without a fast path go through
// gatherWindow.
func interleave(ctx context.Context, schema *arrow.Schema, parts []arrow.RecordBatch, src []source, used [][2]int32, runs int, mem memory.Allocator) (arrow.RecordBatch, error) {
	if !gathersFast(schema) {
		return interleaveSlow(ctx, schema, parts, src, used, mem)
	}
	return gatherBy(ctx, schema, newSourcePlan(parts, src, used, runs), mem)
}

// interleaveSlow is interleave through gatherWindow, for column types the
// word and string paths do not cover. Its window is only the rows the batch
// takes of each part (used): the gather concatenates the window, and a
// part is a lane's whole batch, many times the batch's rows.
func interleaveSlow(ctx context.Context, schema *arrow.Schema, parts []arrow.RecordBatch, src []source, used [][2]int32, mem memory.Allocator) (arrow.RecordBatch, error) {
	w := &window{recs: make([]arrow.RecordBatch, len(parts)), starts: make([]int64, len(parts))}
	defer func() {
		for _, r := range w.recs {
			r.Release()
		}
	}()
	first := make([]int64, len(parts))
	for i, p := range parts {
		lo, hi := int64(0), p.NumRows()
		if used != nil {
			lo, hi = int64(used[i][0]), int64(max(used[i][1], used[i][0]))
		}
		first[i] = lo
		w.recs[i] = newSlice(p, lo, hi)
		w.starts[i] = w.rows
		w.rows += hi - lo
	}
	idx := make([]int32, len(src))
	for i, s := range src {
		idx[i] = int32(w.starts[s.rec] + int64(s.row) - first[s.rec])
	}
	out, err := gatherWindow(ctx, schema, w, idx, mem)
	if w.whole != nil {
		w.whole.Release()
	}
	return out, err
}
