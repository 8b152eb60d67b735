package checkpoint

import (
	"context"
	"errors"
	"fmt"
)

// MixStore keeps the states of mixes of datasets (stream.Mixed) as Store
// keeps datasets': per run, step and rank, a step complete once every rank
// of its world size is stored, decodes and merges (MergeMix). A mix's run
// holds mix states only: a dataset's state found there, or a mix's in a
// dataset's run, is refused as ErrCorrupt naming what it is. Delete works
// on both kinds of run. Every store of this package (BucketStore,
// BackendStore and so pebblestore's) is a MixStore.
type MixStore interface {
	// SaveMix stores the state of one rank at a step, as Store.Save does.
	SaveMix(ctx context.Context, run string, step int64, rank int, st MixState) error
	// LoadMix returns the state one rank saved at a step (ErrNotFound if
	// none, ErrCorrupt if it does not decode).
	LoadMix(ctx context.Context, run string, step int64, rank int) (MixState, error)
	// LoadMixStep returns the states of every rank of a step merged into
	// one (Rank -1), with the errors of Store.LoadStep.
	LoadMixStep(ctx context.Context, run string, step int64) (MixState, error)
	// LatestMix returns the newest complete step of a mix's run, passing
	// over steps that are incomplete, corrupt or inconsistent, as
	// Store.Latest does.
	LatestMix(ctx context.Context, run string) (int64, error)
	// ListMix describes every step stored for a mix's run, in ascending
	// order, as Store.List does for a dataset's.
	ListMix(ctx context.Context, run string) ([]StepInfo, error)
	// RetainMix keeps the newest keep complete steps of a mix's run and
	// deletes every step older than the oldest of them, as Store.Retain.
	RetainMix(ctx context.Context, run string, keep int) error
	// Abandon deletes what rank saved after a step, as Store.Abandon does;
	// it works on both kinds of run, reading no state.
	Abandon(ctx context.Context, run string, rank int, after int64) error
}

var (
	_ MixStore = (*BucketStore)(nil)
	_ MixStore = (*BackendStore)(nil)
)

// SaveMix implements MixStore. In a layout with markers, whoever saves the
// last missing rank of a step writes its marker, as Save does.
func (s *store) SaveMix(ctx context.Context, run string, step int64, rank int, st MixState) error {
	if err := checkRank(run, step, rank); err != nil {
		return err
	}
	where := fmt.Sprintf("run %q step %d rank %d", run, step, rank)
	switch {
	case st.Rank < 0:
		return fmt.Errorf("checkpoint: save mix %s: a merged state (rank %d) is not saved per rank", where, st.Rank)
	case st.Rank != rank:
		return fmt.Errorf("checkpoint: save mix %s: the state is rank %d's", where, st.Rank)
	}
	b, err := EncodeMix(st)
	if err != nil {
		return fmt.Errorf("checkpoint: save mix %s: %w", where, trimPrefix(err))
	}
	return s.put(ctx, "save mix", run, step, rank, stepMarker{st.WorldSize, st.Incarnation}, b, false)
}

// LoadMix implements MixStore.
func (s *store) LoadMix(ctx context.Context, run string, step int64, rank int) (MixState, error) {
	if err := checkRank(run, step, rank); err != nil {
		return MixState{}, err
	}
	if err := s.enter(ctx); err != nil {
		return MixState{}, err
	}
	defer s.mu.RUnlock()
	b, err := s.b.Get(ctx, s.keys.RankKey(run, step, rank))
	if errors.Is(err, ErrNotFound) {
		return MixState{}, fmt.Errorf("checkpoint: run %q step %d rank %d: %w", run, step, rank, trimPrefix(ErrNotFound))
	}
	return decodeStoredMix(run, step, storedRank{rank: rank, data: b, err: err})
}

// LoadMixStep implements MixStore.
func (s *store) LoadMixStep(ctx context.Context, run string, step int64) (MixState, error) {
	if err := checkStep(run, step); err != nil {
		return MixState{}, err
	}
	if err := s.enter(ctx); err != nil {
		return MixState{}, err
	}
	defer s.mu.RUnlock()
	_, merged, err := s.assessMix(ctx, run, step)
	return merged, err
}

// LatestMix implements MixStore.
func (s *store) LatestMix(ctx context.Context, run string) (int64, error) {
	if err := checkRun(run); err != nil {
		return 0, err
	}
	if err := s.enter(ctx); err != nil {
		return 0, err
	}
	defer s.mu.RUnlock()
	return s.newest(ctx, "mix run", run, func(step int64) error {
		return s.judgeNewest(ctx, run, step, func(stepMarker) error {
			_, _, err := s.assessMix(ctx, run, step)
			return err
		})
	})
}

// ListMix implements MixStore.
func (s *store) ListMix(ctx context.Context, run string) ([]StepInfo, error) {
	if err := checkRun(run); err != nil {
		return nil, err
	}
	if err := s.enter(ctx); err != nil {
		return nil, err
	}
	defer s.mu.RUnlock()
	return listKind(ctx, s, mixKind, run)
}

// RetainMix implements MixStore.
func (s *store) RetainMix(ctx context.Context, run string, keep int) error {
	if err := checkKeep(run, keep); err != nil {
		return err
	}
	if err := s.enter(ctx); err != nil {
		return err
	}
	defer s.mu.RUnlock()
	infos, err := listKind(ctx, s, mixKind, run)
	if err != nil {
		return err
	}
	return s.retain(ctx, "mix run", run, infos, keep)
}

// assessMix reads everything stored for a step of a mix's run and judges
// it as mixes' states.
func (s *store) assessMix(ctx context.Context, run string, step int64) (StepInfo, MixState, error) {
	return assessKind(ctx, s, mixKind, run, step)
}

// decodeStoredMix decodes one stored rank of a mix's run and checks it is
// the state its key says it is.
func decodeStoredMix(run string, step int64, sr storedRank) (MixState, error) {
	where := fmt.Sprintf("run %q step %d rank %d", run, step, sr.rank)
	if sr.err != nil {
		return MixState{}, fmt.Errorf("checkpoint: %s: %w", where, sr.err)
	}
	st, err := DecodeMix(sr.data)
	if err != nil {
		return MixState{}, fmt.Errorf("checkpoint: %s: %w", where, trimPrefix(err))
	}
	if st.Rank != sr.rank {
		return MixState{}, fmt.Errorf("checkpoint: %s: %w", where, corrupt("holds the mix state of rank %d", st.Rank))
	}
	return st, nil
}
