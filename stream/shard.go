package stream

import (
	"fmt"

	"github.com/sluicedata/sluice/checkpoint"
	"github.com/sluicedata/sluice/split"
)

// Consumers deals the rank's splits to n consumers in this process (after
// Ray Data's streaming_split):
// n datasets, each iterated on its own (Batches, Map) by its own goroutine,
// over disjoint parts of the rank's splits, together exactly the rows the
// rank would have had.
//
// Consumer i of rank r is, to the plan, rank r + i×WorldSize of a world of
// n×WorldSize ranks, so NumSplits must be a multiple of n×WorldSize. Each
// consumer has its own pipeline and its own position: a slow consumer never
// stalls a fast one, and each takes its own StateDict, a rank state of that
// larger world. The states of all consumers of all ranks merge
// (checkpoint.Merge) into one that resumes the job at any world size and
// any n, and JoinConsumerStates joins one rank's consumers' states into the
// rank's.
// A Checkpointer per consumer saves them as the n×WorldSize ranks they are.
//
// EqualConsumers is Consumers where every consumer gets the same number of
// batches in every epoch, as data-parallel consumers need: that holds when
// every split has the same rows, which Options.DropRemainder makes so at an
// epoch's start, or with Options.EqualBatches, which counts the consumers
// of every rank as the ranks they are to the plan; it requires one of
// them. With EqualBatches, d must stand where every rank's position is
// known: at the start of an epoch, or at a merged state just loaded; and
// the consumers' states resume merged (a state joined from them is refused by a dataset
// with EqualBatches, as a rank's own state without its count).
//
// The consumers start where d stands (a state loaded into d is dealt out
// with its splits), at the start of the rank's round-robin, and share d's
// plan, open files and options, each with 1/n of d's concurrency and
// prefetch bounds (at least one each) so that the process holds what d
// alone would, and with its own metrics.Pipeline. d itself can then no
// longer be iterated or moved (ErrBusy): close the consumers, then d.
func (d *Dataset) Consumers(n int) ([]*Dataset, error) { return d.consumers(n, false) }

// EqualConsumers is Consumers with the same number of batches for every
// consumer in every epoch: see Consumers.
func (d *Dataset) EqualConsumers(n int) ([]*Dataset, error) { return d.consumers(n, true) }

func (d *Dataset) consumers(n int, equal bool) ([]*Dataset, error) {
	engines, err := d.eng.Split(n, equal)
	if err != nil {
		return nil, err
	}
	out := make([]*Dataset, len(engines))
	for i, e := range engines {
		out[i] = &Dataset{opts: d.opts, data: d.data, shared: true, eng: e}
	}
	return out, nil
}

// JoinConsumerStates joins the states that the n consumers of one rank took
// (see Consumers), in any order, into that rank's state: the state a
// dataset of the rank would have taken, which merges with other ranks'
// states and loads into the rank's dataset before it is split again, into
// any n. The consumers may be in different epochs (one whose epoch ended
// is in the next): each split keeps its consumer's. The joined state
// resumes at the start of the rank's round-robin.
func JoinConsumerStates(states ...State) (State, error) {
	n := len(states)
	if n == 0 {
		return State{}, fmt.Errorf("stream: join of no states")
	}
	first := states[0]
	if err := first.Validate(); err != nil {
		return State{}, err
	}
	if first.Rank < 0 {
		return State{}, fmt.Errorf("stream: join: %w: field rank: a merged state is no consumer's", checkpoint.ErrMismatch)
	}
	world := first.WorldSize
	if world%n != 0 {
		return State{}, fmt.Errorf("stream: join: %w: field world_size: %d states cannot be the consumers of one rank of world size %d", checkpoint.ErrMismatch, n, world)
	}
	rankWorld := world / n
	rank := first.Rank % rankWorld
	seen := make([]bool, n)
	out := first.Clone()
	out.Rank, out.WorldSize, out.Next = rank, rankWorld, 0
	epochs := make([]int64, first.NumSplits)
	for _, st := range states {
		out.Epoch = min(out.Epoch, st.Epoch)
	}
	for _, st := range states {
		if err := st.Validate(); err != nil {
			return State{}, err
		}
		if err := checkpoint.SameOrder(&first, &st); err != nil {
			return State{}, fmt.Errorf("stream: join consumer %d: %w", st.Rank, err)
		}
		switch {
		case st.Rank < 0 || st.WorldSize != world:
			return State{}, fmt.Errorf("stream: join: %w: field world_size: state of rank %d has world size %d, the first %d", checkpoint.ErrMismatch, st.Rank, st.WorldSize, world)
		case st.Rank%rankWorld != rank:
			return State{}, fmt.Errorf("stream: join: %w: field rank: state of rank %d of %d is a consumer of rank %d, the first of rank %d", checkpoint.ErrMismatch, st.Rank, world, st.Rank%rankWorld, rank)
		case seen[st.Rank/rankWorld]:
			return State{}, fmt.Errorf("stream: join: %w: field rank: consumer %d of rank %d appears twice", checkpoint.ErrMismatch, st.Rank/rankWorld, rank)
		case st.Incarnation != first.Incarnation:
			return State{}, fmt.Errorf("stream: join: %w: field incarnation: consumer %d was saved by incarnation %q, consumer %d by %q", checkpoint.ErrMismatch, st.Rank/rankWorld, st.Incarnation, first.Rank/rankWorld, first.Incarnation)
		}
		seen[st.Rank/rankWorld] = true
		for _, s := range split.Owned(st.NumSplits, st.Rank, world) {
			out.Cursors[s] = st.Cursors[s]
			epochs[s] = st.SplitEpoch(s)
		}
	}
	out.SetEpochs(epochs)
	for s := range out.Cursors {
		if s%rankWorld != rank {
			out.Cursors[s] = split.Cursor{}
		}
	}
	// The consumers' count of batches left is their world's, not the
	// rank's.
	out.BatchSize, out.BatchesLeft = 0, 0
	return out, nil
}
