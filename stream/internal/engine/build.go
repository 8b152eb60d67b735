package engine

import (
	"context"
	"fmt"
	"slices"
	"sort"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// build makes one batch from its parts: one gather where the windows are
// shuffled; zero-copy slices where they are in storage order, and one
// concatenation where the batch spans several record batches.
func build(ctx context.Context, schema *arrow.Schema, j *job, mem memory.Allocator) (arrow.RecordBatch, error) {
	if shuffled(j) {
		// One gather over every part: no concatenation after.
		parts := make([]gatherPart, len(j.plan.Parts))
		for i, p := range j.plan.Parts {
			w := j.windows[i]
			parts[i] = gatherPart{w, w.order[p.From:p.To]}
		}
		return gather(ctx, schema, parts, mem)
	}
	var pieces []arrow.RecordBatch
	defer func() {
		for _, p := range pieces {
			p.Release()
		}
	}()
	for i, p := range j.plan.Parts {
		w := j.windows[i]
		if w.order == nil {
			pieces = appendSlices(pieces, w, p.From, p.To)
			continue
		}
		got, err := gatherWindow(ctx, schema, w, w.order[p.From:p.To], mem)
		if err != nil {
			return nil, err
		}
		pieces = append(pieces, got)
	}
	if len(pieces) == 1 {
		out := pieces[0]
		pieces = nil
		return out, nil
	}
	return concat(ctx, schema, pieces, mem)
}

// shuffled reports whether every part of j is gathered in a window's order.
func shuffled(j *job) bool {
	for _, w := range j.windows {
		if w.order == nil {
			return false
		}
	}
	return len(j.windows) > 0
}

// appendSlices appends zero-copy slices covering rows [from, to) of w.
func appendSlices(out []arrow.RecordBatch, w *window, from, to int64) []arrow.RecordBatch {
	i := sort.Search(len(w.starts), func(i int) bool { return w.starts[i] > from }) - 1
	for ; from < to; i++ {
		rec := w.recs[i]
		lo := from - w.starts[i]
		hi := min(to-w.starts[i], rec.NumRows())
		out = append(out, newSlice(rec, lo, hi))
		from = w.starts[i] + hi
	}
	return out
}

// concat joins batches of one schema into one. Where every column has a
// gather path of its own, it is a gather of each batch's rows as one run:
// a copy of each buffer into one that needs no zeroing first (see
// gatherOn), where arrow's Concatenate zeroes each buffer and then copies
// into it. A sequential read concatenates the batches that span two row
// groups, about a quarter of them where a file's rows are not a multiple
// of the batch size.
func concat(ctx context.Context, schema *arrow.Schema, recs []arrow.RecordBatch, mem memory.Allocator) (arrow.RecordBatch, error) {
	if gathersFast(schema) {
		// A batch of no rows may have no buffers at all.
		recs = slices.DeleteFunc(slices.Clone(recs), func(r arrow.RecordBatch) bool { return r.NumRows() == 0 })
		return gatherBy(ctx, schema, newConcatPlan(recs), mem)
	}
	return arrowConcat(schema, recs, mem)
}

// arrowConcat is concat through arrow's Concatenate, for every type.
func arrowConcat(schema *arrow.Schema, recs []arrow.RecordBatch, mem memory.Allocator) (arrow.RecordBatch, error) {
	cols := make([]arrow.Array, schema.NumFields())
	defer func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}()
	var rows int64
	for _, r := range recs {
		rows += r.NumRows()
	}
	parts := make([]arrow.Array, len(recs))
	for i := range cols {
		for k, r := range recs {
			parts[k] = r.Column(i)
		}
		c, err := concatenate(parts, mem)
		if err != nil {
			return nil, fmt.Errorf("concatenate column %q: %w", schema.Field(i).Name, err)
		}
		cols[i] = c
	}
	return array.NewRecordBatch(schema, cols, rows), nil
}
