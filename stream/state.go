package stream

import (
	"fmt"
	"slices"

	"github.com/sluicedata/sluice/checkpoint"
	"github.com/sluicedata/sluice/plan"
)

// State is a dataset's position; see checkpoint.State.
type State = checkpoint.State

// StateDict returns the dataset's position: the rows the consumer has taken,
// never rows read ahead. Taken inside the loop body, it resumes after the
// batch just received. It is safe to call while iterating.
func (d *Dataset) StateDict() State {
	d.mu.Lock()
	defer d.mu.Unlock()
	st := d.orderState()
	st.Epoch = d.ep.Epoch
	st.WorldSize = d.opts.WorldSize
	st.Rank = d.opts.Rank
	st.Cursors = slices.Clone(d.cursors)
	st.Next = d.next
	st.Skipped = d.skippedState()
	return st
}

// orderState fills the fields that say which rows come in which order.
func (d *Dataset) orderState() State {
	st := State{
		Version:       checkpoint.StateVersion,
		Plan:          d.planID,
		Columns:       slices.Clone(d.data.Columns),
		Seed:          d.opts.Seed,
		Shuffle:       d.opts.Shuffle,
		ClumpSize:     d.opts.ClumpSize,
		ShuffleWindow: d.opts.ShuffleWindow,
		NumSplits:     d.opts.NumSplits,
		DropRemainder: d.opts.DropRemainder,
	}
	st.Fingerprint = st.OrderFingerprint()
	return st
}

// LoadStateDict moves the dataset to a saved position. It accepts the
// dataset's own rank's state at the same world size, or a state merged from
// all ranks of a step (checkpoint.Merge) at any world size that divides
// NumSplits. A state from another dataset or order is refused with an error
// naming the field that differs (wrapping checkpoint.ErrMismatch).
//
// A merged state restarts the round-robin over the rank's splits at its
// first split: each split's sequence resumes exactly; only the interleaving
// of splits on a rank, which the world size already decides, restarts.
func (d *Dataset) LoadStateDict(st State) error {
	if err := st.Validate(); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.running {
		return ErrBusy
	}
	own := d.orderState()
	if err := checkpoint.SameOrder(&own, &st); err != nil {
		return fmt.Errorf("stream: load state: %w", err)
	}
	next := st.Next
	if st.Rank >= 0 {
		if st.WorldSize != d.opts.WorldSize {
			return fmt.Errorf("stream: load state: %w: field world_size: the state is rank %d of %d, the dataset runs %d ranks; merge all ranks' states (checkpoint.Merge) to change world size",
				checkpoint.ErrMismatch, st.Rank, st.WorldSize, d.opts.WorldSize)
		}
		if st.Rank != d.opts.Rank {
			return fmt.Errorf("stream: load state: %w: field rank: the state is rank %d's, the dataset is rank %d", checkpoint.ErrMismatch, st.Rank, d.opts.Rank)
		}
	} else {
		next = 0
	}
	ep, err := plan.NewEpoch(d.chunks, d.opts.order(), st.Epoch)
	if err != nil {
		return fmt.Errorf("stream: load state: %w", err)
	}
	cursors := make([]plan.Cursor, d.opts.NumSplits)
	for _, s := range plan.Owned(d.opts.NumSplits, d.opts.Rank, d.opts.WorldSize) {
		if err := ep.CheckCursor(s, st.Cursors[s]); err != nil {
			return fmt.Errorf("stream: load state: %w: field cursors: %w", checkpoint.ErrMismatch, err)
		}
		cursors[s] = st.Cursors[s]
	}
	d.moveTo(ep, cursors, next)
	d.loadSkipped(&st)
	return nil
}
