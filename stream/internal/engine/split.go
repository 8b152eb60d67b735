package engine

import (
	"fmt"
	"maps"
	"slices"

	"github.com/sluicedata/sluice/split"
)

// Split deals the rank's splits to n consumers in this process
// (stream.Dataset.Consumers says how they behave): n engines over e's
// plan and data, consumer i being rank Rank + i×WorldSize of a world of
// n×WorldSize ranks, each starting where e stands with 1/n of e's
// concurrency and read-ahead bounds and metrics of its own. e itself can
// then no longer be iterated or moved (ErrBusy).
func (e *Engine) Split(n int, equal bool) ([]*Engine, error) {
	if n < 1 {
		return nil, fmt.Errorf("stream: streaming split into %d consumers: need at least 1", n)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.running {
		return nil, ErrBusy
	}
	o := e.opts
	world := o.WorldSize * n
	if o.Order.NumSplits%world != 0 {
		return nil, fmt.Errorf("stream: streaming split into %d consumers: NumSplits %d is not a multiple of %d consumers × WorldSize %d, so they cannot own as many splits each", n, o.Order.NumSplits, n, o.WorldSize)
	}
	if equal && !o.Order.DropRemainder && !o.EqualBatches {
		return nil, fmt.Errorf("stream: streaming split into %d equal consumers: consumers get the same batches only with Options.DropRemainder or Options.EqualBatches, both off", n)
	}
	if o.EqualBatches && e.every == nil {
		return nil, fmt.Errorf("stream: streaming split into %d consumers with EqualBatches: the dataset has taken batches since the start of its epoch or its merged state, and other ranks' positions are not known to count the consumers' batches; split at the start of an epoch or after loading a merged state (checkpoint.Merge)", n)
	}
	out := make([]*Engine, n)
	for i := range n {
		co := o.sharedOut(1 / float64(n))
		co.Rank = o.Rank + i*o.WorldSize
		co.WorldSize = world
		c := newEngine(e.data, Plan{Chunks: e.chunks, ID: e.planID, Counts: e.counts}, co)
		cursors := make([]split.Cursor, o.Order.NumSplits)
		for _, s := range split.Owned(o.Order.NumSplits, co.Rank, world) {
			cursors[s] = e.cursors[s]
			if a, ok := e.ahead[s]; ok {
				if c.ahead == nil {
					c.ahead = map[int]aheadCursor{}
				}
				c.ahead[s] = a
			}
		}
		c.moveTo(e.ep, cursors, 0)
		if o.EqualBatches {
			// Every consumer of every rank counts the same, now and in
			// the epochs other ranks' splits wait for.
			if err := c.countEqual(slices.Clone(e.every)); err != nil {
				return nil, err
			}
			c.ahead = maps.Clone(e.ahead)
		}
		out[i] = c
	}
	// The consumers own the position now; windows e read ahead are not
	// theirs to use, so they go.
	e.kept.drop()
	e.running = true
	return out, nil
}
