package checkpoint

import (
	"fmt"
	"slices"
)

// own is a state's entries for the splits it speaks for, and nothing of
// the others'. A rank's State holds a cursor per split of the job, of
// which the rank's own (NumSplits/WorldSize of them) are the only ones
// anything reads: at 8,192 splits and 1,024 ranks, 8 of 8,192. Merge, a
// store judging a step and the version 6 encoding go by own, so that a
// step of W ranks costs them in proportion to its splits, not to W times
// its splits.
type own struct {
	// head is the state without its per-split lists (Cursors, Skipped and
	// Epochs are nil).
	head State
	// cursors holds the cursors of the splits the state speaks for, in
	// ascending order: Rank, Rank+WorldSize, ... (every split for a merged
	// state, see walk).
	cursors []Cursor
	// skipped and epochs are nil, or hold one entry per cursor: the
	// split's count of skipped rows, and its epoch. Where every entry is
	// zero (skipped) or head.Epoch (epochs), they are nil.
	skipped []int64
	epochs  []int64
}

// walk is the first split the state speaks for and the step to the next:
// rank r of world w speaks for r, r+w, r+2w, ...; a merged state for all.
func (s *State) walk() (first, step int) {
	if s.Rank < 0 {
		return 0, 1
	}
	return s.Rank, s.WorldSize
}

// owned is the number of splits a valid state speaks for.
func (s *State) owned() int {
	first, step := s.walk()
	return (s.NumSplits - first + step - 1) / step
}

// own returns the entries of the splits s speaks for, after checking s as
// Validate does except for the entries of other splits, which nothing
// reads. A state of another rank's splits then costs nothing to check or
// take apart.
func (s *State) own() (own, error) {
	if err := s.validateHead(len(s.Cursors)); err != nil {
		return own{}, err
	}
	if s.Skipped != nil && len(s.Skipped) != s.NumSplits {
		return own{}, fmt.Errorf("checkpoint: state has %d skipped counts for num_splits %d", len(s.Skipped), s.NumSplits)
	}
	if s.Epochs != nil && len(s.Epochs) != s.NumSplits {
		return own{}, fmt.Errorf("checkpoint: state has %d split epochs for num_splits %d", len(s.Epochs), s.NumSplits)
	}
	o := own{head: *s}
	o.head.Cursors, o.head.Skipped, o.head.Epochs = nil, nil, nil
	first, step := s.walk()
	n := s.owned()
	o.cursors = make([]Cursor, 0, n)
	for i := first; i < s.NumSplits; i += step {
		o.cursors = append(o.cursors, s.Cursors[i])
	}
	pick := func(all []int64) []int64 {
		if all == nil {
			return nil
		}
		out := make([]int64, 0, n)
		for i := first; i < s.NumSplits; i += step {
			out = append(out, all[i])
		}
		return out
	}
	o.skipped, o.epochs = pick(s.Skipped), pick(s.Epochs)
	o.canonical()
	return o, o.validateEntries()
}

// canonical drops skipped and epochs lists that say nothing: all zero, or
// every split in head.Epoch.
func (o *own) canonical() {
	if !slices.ContainsFunc(o.skipped, func(n int64) bool { return n != 0 }) {
		o.skipped = nil
	}
	if !slices.ContainsFunc(o.epochs, func(e int64) bool { return e != o.head.Epoch }) {
		o.epochs = nil
	}
}

// validate checks o as Validate checks a state: what a decoder must refuse
// of the own entries that a version 6 payload holds.
func (o *own) validate() error {
	if err := o.head.validateHead(-1); err != nil {
		return err
	}
	n := o.head.owned()
	switch {
	case len(o.cursors) != n:
		return fmt.Errorf("checkpoint: state has %d cursors for the %d splits it speaks for", len(o.cursors), n)
	case o.skipped != nil && len(o.skipped) != n:
		return fmt.Errorf("checkpoint: state has %d skipped counts for the %d splits it speaks for", len(o.skipped), n)
	case o.epochs != nil && len(o.epochs) != n:
		return fmt.Errorf("checkpoint: state has %d split epochs for the %d splits it speaks for", len(o.epochs), n)
	}
	return o.validateEntries()
}

// validateEntries checks every entry of o's lists, naming the split of one
// that is wrong as Validate does.
func (o *own) validateEntries() error {
	first, step := o.head.walk()
	for i, c := range o.cursors {
		if c.Window < 0 || c.Offset < 0 || c.Rows < 0 {
			return fmt.Errorf("checkpoint: state cursor %d is negative", first+i*step)
		}
	}
	for i, e := range o.epochs {
		if e < o.head.Epoch {
			return fmt.Errorf("checkpoint: state split %d is at epoch %d, before the state's epoch %d", first+i*step, e, o.head.Epoch)
		}
	}
	for i, n := range o.skipped {
		if n < 0 {
			return fmt.Errorf("checkpoint: state skipped count %d is negative", first+i*step)
		}
	}
	return nil
}

// splitEpoch is the epoch of o's i-th split.
func (o *own) splitEpoch(i int) int64 {
	if o.epochs == nil {
		return o.head.Epoch
	}
	return o.epochs[i]
}

// state is o as a State: a cursor per split, zero for the splits it does
// not speak for, as a dataset's StateDict gives it.
func (o *own) state() State {
	st := o.head
	st.Columns = slices.Clone(st.Columns)
	n := st.NumSplits
	first, step := st.walk()
	st.Cursors = make([]Cursor, n)
	for i, c := range o.cursors {
		st.Cursors[first+i*step] = c
	}
	if o.skipped != nil {
		st.Skipped = make([]int64, n)
		for i, k := range o.skipped {
			st.Skipped[first+i*step] = k
		}
	}
	if o.epochs != nil {
		st.Epochs = make([]int64, n)
		for s := range st.Epochs {
			st.Epochs[s] = st.Epoch
		}
		for i, e := range o.epochs {
			st.Epochs[first+i*step] = e
		}
	}
	return st
}

// othersEmpty reports whether every entry of the splits s does not speak
// for is as a rank's dataset leaves it (a zero cursor, no skipped rows,
// the state's epoch): then its own entries are the whole state.
func (s *State) othersEmpty() bool {
	first, step := s.walk()
	next := first // the next split s speaks for
	for i := range s.NumSplits {
		switch {
		case i == next:
			next += step
		case s.Cursors[i] != (Cursor{}):
			return false
		case s.Skipped != nil && s.Skipped[i] != 0:
			return false
		case s.Epochs != nil && s.Epochs[i] != s.Epoch:
			return false
		}
	}
	return true
}

// mergeOwn is Merge over states' own entries, checked (see State.own).
// Its cost is in proportion to the splits and the ranks, each state's
// entries being read once.
func mergeOwn(parts []own) (State, error) {
	if len(parts) == 0 {
		return State{}, fmt.Errorf("checkpoint: merge of no states")
	}
	first := &parts[0].head
	if first.Rank < 0 {
		if len(parts) != 1 {
			return State{}, fmt.Errorf("checkpoint: merge of a merged state with others")
		}
		return parts[0].state(), nil
	}
	world := first.WorldSize
	if len(parts) != world {
		return State{}, fmt.Errorf("%w: merge needs all %d ranks, got %d states", ErrMismatch, world, len(parts))
	}
	out := *first
	out.Columns = slices.Clone(out.Columns)
	out.Rank = -1
	out.Next = 0
	// Every rank's cursors are in the merge: a dataset counts from them.
	out.BatchSize, out.BatchesLeft = 0, 0
	counted := map[int64]*State{} // per epoch, a rank's count of batches left
	seen := make([]bool, world)
	n := first.NumSplits
	cursors := make([]Cursor, n)
	epochs := make([]int64, n)
	var skipped []int64
	for i := range parts {
		out.Epoch = min(out.Epoch, parts[i].head.Epoch)
	}
	for i := range parts {
		p := &parts[i]
		st := &p.head
		if err := SameOrder(first, st); err != nil {
			return State{}, fmt.Errorf("merge rank %d: %w", st.Rank, err)
		}
		if st.Incarnation != first.Incarnation {
			return State{}, fmt.Errorf("%w: field incarnation: rank %d was saved by incarnation %q, rank %d by %q", ErrMismatch, st.Rank, st.Incarnation, first.Rank, first.Incarnation)
		}
		if o, ok := counted[st.Epoch]; ok && (st.BatchSize != o.BatchSize || st.BatchesLeft != o.BatchesLeft) {
			// Ranks with equal batches take them in lockstep: counts that
			// differ within an epoch are states of different steps.
			return State{}, fmt.Errorf("%w: field batches_left: rank %d has %d batches of %d rows left, rank %d has %d of %d in the same epoch: not states of one step",
				ErrMismatch, st.Rank, st.BatchesLeft, st.BatchSize, o.Rank, o.BatchesLeft, o.BatchSize)
		}
		counted[st.Epoch] = st
		if st.Rank < 0 || st.WorldSize != world {
			return State{}, fmt.Errorf("%w: field world_size: rank %d has world_size %d, expected %d", ErrMismatch, st.Rank, st.WorldSize, world)
		}
		if seen[st.Rank] {
			return State{}, fmt.Errorf("%w: field rank: rank %d appears twice", ErrMismatch, st.Rank)
		}
		seen[st.Rank] = true
		for j, c := range p.cursors {
			s := st.Rank + j*world
			cursors[s] = c
			epochs[s] = p.splitEpoch(j)
			if p.skipped != nil && p.skipped[j] != 0 {
				if skipped == nil {
					skipped = make([]int64, n)
				}
				skipped[s] = p.skipped[j]
			}
		}
	}
	out.Cursors = cursors
	out.SetEpochs(epochs)
	out.Skipped = skipped
	return out, nil
}
