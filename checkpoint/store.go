package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"unicode/utf8"
)

// Store keeps the states that the ranks of training runs save at steps, and
// finds the newest step a run can resume from.
//
// A run is a name chosen by the caller; a step is a non-negative training
// step number; a rank saves its own state for a step, and a step is complete
// once every rank 0..WorldSize-1 of it is stored, decodes and agrees with the
// others on the dataset, order, epoch and world size (so that Merge accepts
// them). Implementations are safe for concurrent use, also by several
// processes where the implementation says so.
type Store interface {
	// Save stores the state of one rank at a step, replacing any state that
	// rank saved there before. It refuses a state that fails Validate, a
	// merged state (Rank -1), or a rank that differs from st.Rank.
	Save(ctx context.Context, run string, step int64, rank int, st State) error
	// Load returns the state one rank saved at a step. It wraps ErrNotFound
	// if there is none and ErrCorrupt if the stored bytes do not decode.
	Load(ctx context.Context, run string, step int64, rank int) (State, error)
	// LoadStep returns the states of every rank of a step merged into one
	// (Rank -1) with Merge. It wraps ErrNotFound if nothing is stored for the
	// step, ErrIncomplete if a rank is missing, ErrCorrupt if one does not
	// decode, and ErrMismatch (naming the field) if the ranks disagree.
	LoadStep(ctx context.Context, run string, step int64) (State, error)
	// Latest returns the newest complete step of a run. Steps that are
	// incomplete, corrupt or inconsistent are passed over. It wraps
	// ErrNotFound if the run has no complete step.
	Latest(ctx context.Context, run string) (step int64, err error)
	// List describes every step stored for a run, in ascending order.
	List(ctx context.Context, run string) ([]StepInfo, error)
	// Delete removes every state of a step. Deleting a step that does not
	// exist is not an error.
	Delete(ctx context.Context, run string, step int64) error
	// Retain keeps the newest keep complete steps of a run and deletes every
	// step older than the oldest of them, complete or not; steps newer than
	// it (such as one being saved right now) are left alone. keep must be at
	// least 1: a run must keep something to resume from.
	Retain(ctx context.Context, run string, keep int) error
	// Close releases the store, waiting for calls in flight. Later calls
	// other than Close fail with ErrClosed; a second Close returns nil.
	Close() error
}

// StepInfo describes one stored step of a run.
type StepInfo struct {
	// Step is the step number.
	Step int64
	// Ranks lists the ranks with something stored for the step, ascending,
	// whether or not their states decode.
	Ranks []int
	// WorldSize is the world size the step's states agree on, or 0 if one
	// of them does not decode or they disagree.
	WorldSize int
	// Complete reports whether the step can be resumed from: every rank of
	// WorldSize is stored and decodes, and Merge accepts them.
	Complete bool
	// RankErrors holds, by rank, why a stored state could not be read.
	RankErrors map[int]string
	// Reason says why an incomplete step is incomplete; empty when Complete.
	Reason string
}

// MaxRunName is the longest run name a store accepts, in bytes.
const MaxRunName = 200

// checkRun refuses run names that could not be kept apart in every store: a
// bucket store makes the run a path segment and the pebble store ends it
// with a NUL, so separators and control characters are refused.
func checkRun(run string) error {
	switch {
	case run == "":
		return errors.New("checkpoint: run name is empty")
	case len(run) > MaxRunName:
		return fmt.Errorf("checkpoint: run name of %d bytes is longer than %d", len(run), MaxRunName)
	case !utf8.ValidString(run):
		return fmt.Errorf("checkpoint: run name %q is not valid UTF-8", run)
	case run == "." || run == "..":
		return fmt.Errorf("checkpoint: run name %q is reserved", run)
	case strings.ContainsAny(run, `/\`):
		return fmt.Errorf("checkpoint: run name %q contains a path separator", run)
	}
	for _, c := range run {
		if c < 0x20 || c == 0x7f {
			return fmt.Errorf("checkpoint: run name %q contains a control character", run)
		}
	}
	return nil
}

func checkStep(run string, step int64) error {
	if err := checkRun(run); err != nil {
		return err
	}
	if step < 0 {
		return fmt.Errorf("checkpoint: run %q step %d is negative", run, step)
	}
	return nil
}

func checkRank(run string, step int64, rank int) error {
	if err := checkStep(run, step); err != nil {
		return err
	}
	if rank < 0 || rank > math.MaxInt32 {
		return fmt.Errorf("checkpoint: run %q step %d rank %d is out of range", run, step, rank)
	}
	return nil
}

// checkSave is what every store checks before it writes.
func checkSave(run string, step int64, rank int, st *State) error {
	if err := checkRank(run, step, rank); err != nil {
		return err
	}
	where := fmt.Sprintf("run %q step %d rank %d", run, step, rank)
	if st.Rank < 0 {
		return fmt.Errorf("checkpoint: save %s: a merged state (rank %d) is not saved per rank", where, st.Rank)
	}
	if st.Rank != rank {
		return fmt.Errorf("checkpoint: save %s: the state is rank %d's", where, st.Rank)
	}
	if err := st.Validate(); err != nil {
		return fmt.Errorf("checkpoint: save %s: %w", where, trimPrefix(err))
	}
	return nil
}

// trimPrefix keeps the package name from repeating when an error of this
// package is wrapped by another of its errors. The chain is kept.
func trimPrefix(err error) error {
	return &trimmed{err}
}

type trimmed struct{ err error }

func (t *trimmed) Error() string { return strings.TrimPrefix(t.err.Error(), "checkpoint: ") }
func (t *trimmed) Unwrap() error { return t.err }

// storedRank is one rank's stored bytes for a step, as read, not yet decoded.
type storedRank struct {
	rank int
	data []byte
	err  error // a failure to read the bytes, other than their absence
}

// noMarker is the marker world size of a store that keeps no markers.
const noMarker = -1

// assessStep decides whether a step is complete and, if so, merges it. It is
// shared by every store so that all of them judge steps alike. ranks must be
// in ascending rank order. marker is the world size recorded by the step's
// completion marker: 0 if the store keeps markers and this step has none,
// noMarker for a store that keeps none. The error says why the step is not
// complete; info describes the step either way.
func assessStep(run string, step int64, ranks []storedRank, marker int) (info StepInfo, merged State, err error) {
	info.Step = step
	where := fmt.Sprintf("run %q step %d", run, step)
	fail := func(e error) (StepInfo, State, error) {
		info.Complete = false
		info.Reason = strings.TrimLeft(strings.TrimPrefix(e.Error(), "checkpoint: "+where), ": ")
		return info, State{}, e
	}
	if len(ranks) == 0 {
		if marker > 0 {
			return fail(fmt.Errorf("checkpoint: %s: %w: a completion marker but no states", where, trimPrefix(ErrIncomplete)))
		}
		return fail(fmt.Errorf("checkpoint: %s: %w: no states", where, trimPrefix(ErrNotFound)))
	}
	states := make([]State, 0, len(ranks))
	var firstErr error
	for _, sr := range ranks {
		info.Ranks = append(info.Ranks, sr.rank)
		st, err := decodeStored(run, step, sr)
		if err != nil {
			if info.RankErrors == nil {
				info.RankErrors = make(map[int]string)
			}
			info.RankErrors[sr.rank] = err.Error()
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		states = append(states, st)
	}
	if firstErr != nil {
		return fail(firstErr)
	}
	world := states[0].WorldSize
	for _, st := range states[1:] {
		if st.WorldSize != world {
			return fail(fmt.Errorf("checkpoint: %s: %w: field world_size: rank %d has %d, rank %d has %d",
				where, trimPrefix(ErrMismatch), states[0].Rank, world, st.Rank, st.WorldSize))
		}
	}
	info.WorldSize = world
	if len(states) != world {
		var missing []int
		for r := range world {
			if _, found := slices.BinarySearchFunc(states, r, func(s State, r int) int { return s.Rank - r }); !found {
				missing = append(missing, r)
			}
		}
		return fail(fmt.Errorf("checkpoint: %s: %w: ranks %v of world size %d are missing", where, trimPrefix(ErrIncomplete), missing, world))
	}
	if marker != noMarker && marker != world {
		if marker == 0 {
			return fail(fmt.Errorf("checkpoint: %s: %w: no completion marker", where, trimPrefix(ErrIncomplete)))
		}
		return fail(fmt.Errorf("checkpoint: %s: %w: field world_size: completion marker says %d, states say %d",
			where, trimPrefix(ErrMismatch), marker, world))
	}
	merged, err = Merge(states...)
	if err != nil {
		return fail(fmt.Errorf("checkpoint: %s: %w", where, trimPrefix(err)))
	}
	info.Complete = true
	return info, merged, nil
}

// decodeStored decodes one stored rank and checks it is the state its key
// says it is: a value moved or copied under another rank's key is as unusable
// as a damaged one.
func decodeStored(run string, step int64, sr storedRank) (State, error) {
	where := fmt.Sprintf("run %q step %d rank %d", run, step, sr.rank)
	if sr.err != nil {
		return State{}, fmt.Errorf("checkpoint: %s: %w", where, sr.err)
	}
	st, err := Decode(sr.data)
	if err != nil {
		return State{}, fmt.Errorf("checkpoint: %s: %w", where, trimPrefix(err))
	}
	if st.Rank != sr.rank {
		return State{}, fmt.Errorf("checkpoint: %s: %w", where, corrupt("holds the state of rank %d", st.Rank))
	}
	return st, nil
}

// skippable reports whether Latest may pass over a step that failed with
// err and fall back to an older one: the step is damaged, incomplete or
// inconsistent. Anything else (a state from a newer sluice, an I/O failure)
// ends Latest, since resuming from an older step than the job reached would
// silently repeat work and hide the problem.
func skippable(err error) bool {
	return errors.Is(err, ErrCorrupt) || errors.Is(err, ErrIncomplete) ||
		errors.Is(err, ErrMismatch) || errors.Is(err, ErrNotFound)
}

// pickRetained returns the oldest step to keep when the newest keep complete
// steps of infos (ascending) are kept, and false if no step is complete, in
// which case nothing is deleted.
func pickRetained(infos []StepInfo, keep int) (oldestKept int64, ok bool) {
	kept := 0
	for i := len(infos) - 1; i >= 0 && kept < keep; i-- {
		if infos[i].Complete {
			oldestKept, ok = infos[i].Step, true
			kept++
		}
	}
	return oldestKept, ok
}

func checkKeep(run string, keep int) error {
	if err := checkRun(run); err != nil {
		return err
	}
	if keep < 1 {
		return fmt.Errorf("checkpoint: retain run %q: keep %d must be at least 1", run, keep)
	}
	return nil
}
