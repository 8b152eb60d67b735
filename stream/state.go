package stream

import "github.com/sluicedata/sluice/checkpoint"

// State is a dataset's position; see checkpoint.State.
type State = checkpoint.State

// StateDict returns the dataset's position: the rows the consumer has taken,
// never rows read ahead. Taken inside the loop body, it resumes after the
// batch just received; taken after the loop ended, it is at the start of
// the next epoch. It is safe to call while iterating, and the states of
// all ranks merge (checkpoint.Merge) whatever each rank's epoch: a rank
// whose epoch ended merges with ranks still in it.
func (d *Dataset) StateDict() State { return d.eng.State() }

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
func (d *Dataset) LoadStateDict(st State) error { return d.eng.LoadState(st) }
