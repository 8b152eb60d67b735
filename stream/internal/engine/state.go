package engine

import (
	"fmt"
	"slices"

	"github.com/sluicedata/sluice/checkpoint"
	"github.com/sluicedata/sluice/split"
)

// State is the position as a state: the rows the consumer has taken, never
// rows read ahead (stream.Dataset.StateDict).
func (e *Engine) State() checkpoint.State {
	e.mu.Lock()
	defer e.mu.Unlock()
	st := e.OrderState()
	st.Epoch = e.ep.Epoch
	st.WorldSize = e.opts.WorldSize
	st.Rank = e.opts.Rank
	// Only the rank's own splits' cursors: the engine keeps others' where
	// every rank's position counts (EqualBatches), but a rank's state
	// speaks for its own, and with the others zero a state of many splits
	// is written with its own entries only (checkpoint.Encode).
	st.Cursors = make([]split.Cursor, e.opts.Order.NumSplits)
	for s := e.opts.Rank; s < e.opts.Order.NumSplits; s += e.opts.WorldSize {
		st.Cursors[s] = e.cursors[s]
	}
	st.Next = e.next
	st.Skipped = e.skippedState()
	if e.ahead != nil {
		epochs := make([]int64, e.opts.Order.NumSplits)
		for s := range epochs {
			epochs[s] = e.ep.Epoch
		}
		for s, a := range e.ahead {
			if st.Owns(s) {
				epochs[s], st.Cursors[s] = a.epoch, a.cursor
			}
		}
		st.SetEpochs(epochs)
	}
	if e.opts.EqualBatches {
		st.BatchSize, st.BatchesLeft = e.opts.BatchSize, e.left
	}
	return st
}

// OrderState is a state with only the fields that say which rows come in
// which order filled in: what a state must match to load.
func (e *Engine) OrderState() checkpoint.State {
	e.orderOnce.Do(func() { e.order = e.orderState() })
	st := e.order
	st.Columns = slices.Clone(st.Columns)
	return st
}

func (e *Engine) orderState() checkpoint.State {
	st := checkpoint.State{
		Version:       checkpoint.StateVersion,
		Plan:          e.planID,
		Columns:       slices.Clone(e.data.Columns),
		Seed:          e.opts.Order.Seed,
		Shuffle:       e.opts.Order.Shuffle,
		ClumpSize:     e.opts.Order.ClumpSize,
		ShuffleWindow: e.opts.Order.ShuffleWindow,
		NumSplits:     e.opts.Order.NumSplits,
		DropRemainder: e.opts.Order.DropRemainder,
	}
	if e.opts.Order.Passes > 1 {
		// One pass is written as none, as states were before passes.
		st.ShufflePasses = e.opts.Order.Passes
	}
	st.Fingerprint = st.OrderFingerprint()
	return st
}

// LoadState moves the engine to a saved position
// (stream.Dataset.LoadStateDict says which states it takes, and how it
// resumes a merged one).
func (e *Engine) LoadState(st checkpoint.State) error {
	if err := st.Validate(); err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.running {
		return ErrBusy
	}
	own := e.OrderState()
	if err := checkpoint.SameOrder(&own, &st); err != nil {
		if own.Plan != st.Plan {
			// The state holds the plan's hash only, which cannot say
			// which file moved it; a shared plan lists them.
			return fmt.Errorf("stream: load state: %w (the plan covers each file's path, size and row count, and the chunks cut from them: a file was added, removed or rewritten since the state was taken, or ChunkBytes or the shuffle window differ; with Options.PlanStore the file is named)", err)
		}
		return fmt.Errorf("stream: load state: %w", err)
	}
	next := st.Next
	if st.Rank >= 0 {
		if st.WorldSize != e.opts.WorldSize {
			return fmt.Errorf("stream: load state: %w: field world_size: the state is rank %d of %d, the dataset runs %d ranks; merge all ranks' states (checkpoint.Merge) to change world size",
				checkpoint.ErrMismatch, st.Rank, st.WorldSize, e.opts.WorldSize)
		}
		if st.Rank != e.opts.Rank {
			return fmt.Errorf("stream: load state: %w: field rank: the state is rank %d's, the dataset is rank %d", checkpoint.ErrMismatch, st.Rank, e.opts.Rank)
		}
	} else {
		next = 0
	}
	owned := split.Owned(e.opts.Order.NumSplits, e.opts.Rank, e.opts.WorldSize)
	at := st.Epoch
	epochs := map[int64]*split.Epoch{}
	epochOf := func(n int64) (*split.Epoch, error) {
		if ep := epochs[n]; ep != nil {
			return ep, nil
		}
		ep, err := e.newEpoch(n)
		if err != nil {
			return nil, fmt.Errorf("stream: load state: %w", err)
		}
		epochs[n] = ep
		return ep, nil
	}
	ep, err := epochOf(at)
	if err != nil {
		return err
	}
	if !e.opts.Order.Shuffle {
		// A state taken before storage-order reads cut paged chunks at
		// twice the window counts other windows (split.Epoch.Rebase).
		st.Cursors = slices.Clone(st.Cursors)
		for s, c := range st.Cursors {
			sep, err := epochOf(st.SplitEpoch(s))
			if err != nil {
				return err
			}
			st.Cursors[s] = sep.Rebase(e.chunks, s, c)
		}
	}
	cursors := make([]split.Cursor, e.opts.Order.NumSplits)
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
		if se == at {
			cursors[s] = st.Cursors[s]
			continue
		}
		if ahead == nil {
			ahead = map[int]aheadCursor{}
		}
		ahead[s] = aheadCursor{epoch: se, cursor: st.Cursors[s]}
		cursors[s] = ep.End(s)
	}
	left, every, err := e.equalLeft(ep, epochOf, &st)
	if err != nil {
		return err
	}
	if every != nil {
		// Every rank's splits in later epochs, for the counts there.
		for s := range st.Cursors {
			if se := st.SplitEpoch(s); se != at {
				if ahead == nil {
					ahead = map[int]aheadCursor{}
				}
				ahead[s] = aheadCursor{epoch: se, cursor: st.Cursors[s]}
			}
		}
	}
	e.moveTo(ep, cursors, next)
	e.ahead = ahead
	e.left, e.every = left, every
	e.loadSkipped(&st)
	return nil
}

// equalLeft is the batches this rank has left at st with EqualBatches (0
// without), and, for a merged state, every split's cursor in ep (those of
// splits in later epochs at its end).
func (e *Engine) equalLeft(ep *split.Epoch, epochOf func(int64) (*split.Epoch, error), st *checkpoint.State) (int64, []split.Cursor, error) {
	o := e.opts
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
