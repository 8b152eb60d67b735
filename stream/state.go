package stream

import (
	"fmt"
	"slices"

	"github.com/sluicedata/sluice/checkpoint"
	"github.com/sluicedata/sluice/split"
)

// State is a dataset's position; see checkpoint.State.
type State = checkpoint.State

// StateDict returns the dataset's position: the rows the consumer has taken,
// never rows read ahead. Taken inside the loop body, it resumes after the
// batch just received; taken after the loop ended, it is at the start of
// the next epoch. It is safe to call while iterating, and the states of
// all ranks merge (checkpoint.Merge) whatever each rank's epoch: a rank
// whose epoch ended merges with ranks still in it.
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
	if d.ahead != nil {
		epochs := make([]int64, d.opts.NumSplits)
		for s := range epochs {
			epochs[s] = d.ep.Epoch
		}
		for s, a := range d.ahead {
			epochs[s], st.Cursors[s] = a.epoch, a.cursor
		}
		st.SetEpochs(epochs)
	}
	if d.opts.EqualBatches {
		st.BatchSize, st.BatchesLeft = d.opts.BatchSize, d.left
	}
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
//
// Where the state's splits are in different epochs (a merge of ranks saved
// at an epoch's boundary, State.Epochs), the dataset is at the state's
// Epoch, the least of the ranks', whatever splits it owns, so that every
// rank of the resumed job counts epochs alike: it delivers the rest of that
// epoch's splits (nothing, where all its splits are further on), and each
// split in a later epoch resumes where it stands when that epoch comes.
//
// With EqualBatches, a merged state's cursors give every rank's batches
// left, and they are counted again; a rank's own state must carry the count
// (State.BatchesLeft, of this BatchSize), as one taken with EqualBatches
// does, and have every split in one epoch: one without is refused, as it
// cannot tell the other ranks' rows.
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
	owned := split.Owned(d.opts.NumSplits, d.opts.Rank, d.opts.WorldSize)
	e := st.Epoch
	epochs := map[int64]*split.Epoch{}
	epochOf := func(e int64) (*split.Epoch, error) {
		if ep := epochs[e]; ep != nil {
			return ep, nil
		}
		ep, err := d.newEpoch(e)
		if err != nil {
			return nil, fmt.Errorf("stream: load state: %w", err)
		}
		epochs[e] = ep
		return ep, nil
	}
	ep, err := epochOf(e)
	if err != nil {
		return err
	}
	cursors := make([]split.Cursor, d.opts.NumSplits)
	var ahead map[int]aheadCursor
	for _, s := range owned {
		se := st.SplitEpoch(s)
		sep, err := epochOf(se)
		if err != nil {
			return err
		}
		if err := sep.CheckCursor(s, st.Cursors[s]); err != nil {
			return fmt.Errorf("stream: load state: %w: field cursors: epoch %d: %w", checkpoint.ErrMismatch, se, err)
		}
		if se == e {
			cursors[s] = st.Cursors[s]
			continue
		}
		if ahead == nil {
			ahead = map[int]aheadCursor{}
		}
		ahead[s] = aheadCursor{epoch: se, cursor: st.Cursors[s]}
		cursors[s] = ep.End(s)
	}
	left, every, err := d.equalLeft(ep, epochOf, &st)
	if err != nil {
		return err
	}
	if every != nil {
		// Every rank's splits in later epochs, for the counts there.
		for s := range st.Cursors {
			if se := st.SplitEpoch(s); se != e {
				if ahead == nil {
					ahead = map[int]aheadCursor{}
				}
				ahead[s] = aheadCursor{epoch: se, cursor: st.Cursors[s]}
			}
		}
	}
	d.moveTo(ep, cursors, next)
	d.ahead = ahead
	d.left, d.every = left, every
	d.loadSkipped(&st)
	return nil
}

// equalLeft is the batches this rank has left at st with EqualBatches (0
// without), and, for a merged state, every split's cursor in ep (those of
// splits in later epochs at its end).
func (d *Dataset) equalLeft(ep *split.Epoch, epochOf func(int64) (*split.Epoch, error), st *State) (int64, []split.Cursor, error) {
	o := d.opts
	if !o.EqualBatches {
		return 0, nil, nil
	}
	if st.Rank < 0 {
		every := make([]split.Cursor, len(st.Cursors))
		for s, c := range st.Cursors {
			se := st.SplitEpoch(s)
			sep, err := epochOf(se)
			if err != nil {
				return 0, nil, err
			}
			if err := sep.CheckCursor(s, c); err != nil {
				return 0, nil, fmt.Errorf("stream: load state: %w: field cursors: epoch %d: %w", checkpoint.ErrMismatch, se, err)
			}
			every[s] = c
			if se != ep.Epoch {
				every[s] = ep.End(s)
			}
		}
		n, err := ep.EqualBatches(o.WorldSize, o.BatchSize, every)
		if err != nil {
			return 0, nil, fmt.Errorf("stream: load state: %w", err)
		}
		return n, every, nil
	}
	var why string
	switch {
	case st.BatchSize == 0:
		why = "was taken without EqualBatches"
	case st.BatchSize != o.BatchSize:
		why = fmt.Sprintf("counts batches of %d rows, the dataset's are %d", st.BatchSize, o.BatchSize)
	case st.Epochs != nil:
		why = "has splits in a later epoch, where the other ranks' may be too"
	}
	if why != "" {
		return 0, nil, fmt.Errorf("stream: load state: %w: field batch_size: rank %d's own state %s, and tells only its own splits' rows, not how many batches the other ranks have left; load the merged state of all ranks (checkpoint.Merge)",
			checkpoint.ErrMismatch, st.Rank, why)
	}
	if own := ep.RankBatches(o.Rank, o.WorldSize, o.BatchSize, st.Cursors); st.BatchesLeft > own {
		return 0, nil, fmt.Errorf("stream: load state: %w: field batches_left: %d batches left, rank %d's cursors hold %d", checkpoint.ErrMismatch, st.BatchesLeft, st.Rank, own)
	}
	return st.BatchesLeft, nil, nil
}
