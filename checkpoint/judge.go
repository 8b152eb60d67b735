package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// A step is judged alike for datasets' states and mixes': every rank of
// one world size stored, decoding, of one incarnation (one start of the
// job) and, in a layout with markers, vouched for by a marker naming that
// world size and incarnation. kind holds what differs between the two: a
// rank's stored state S, and M, the merge of a step's.
type kind[S, M any] struct {
	decode func(run string, step int64, sr storedRank) (S, error)
	// meta returns what a state says of where it was saved.
	meta  func(*S) (rank, world int, incarnation string)
	merge func(...S) (M, error)
}

var (
	// A dataset's step is read as each rank's own entries (see own):
	// the states of a step of W ranks each hold an entry per split, and
	// read whole they would cost W times the splits.
	datasetKind = kind[own, State]{
		decode: decodeStoredOwn,
		meta:   func(o *own) (int, int, string) { return o.head.Rank, o.head.WorldSize, o.head.Incarnation },
		merge:  func(parts ...own) (State, error) { return mergeOwn(parts) },
	}
	mixKind = kind[MixState, MixState]{
		decode: decodeStoredMix,
		meta:   func(s *MixState) (int, int, string) { return s.Rank, s.WorldSize, s.Incarnation },
		merge:  MergeMix,
	}
)

// stepMarker is what a step's completion marker records.
type stepMarker struct {
	// world is the world size, noMarker in a layout without markers, 0
	// where the step has none.
	world       int
	incarnation string
}

// noMarker is the marker world size of a store that keeps no markers.
const noMarker = -1

// markerBytes is a marker's content: the world size in decimal and, where
// the states name one, a space and the incarnation. A marker without an
// incarnation is spelled as before incarnations were kept, so that older
// builds read the steps they can read.
func markerBytes(world int, incarnation string) []byte {
	if incarnation == "" {
		return []byte(strconv.Itoa(world) + "\n")
	}
	return []byte(strconv.Itoa(world) + " " + incarnation + "\n")
}

// readMarker returns what a step's marker records (world 0 if it has
// none), or an error wrapping ErrCorrupt if the marker is malformed.
func (s *store) readMarker(ctx context.Context, run string, step int64) (stepMarker, error) {
	b, err := s.b.Get(ctx, s.keys.MarkerKey(run, step))
	if errors.Is(err, ErrNotFound) {
		return stepMarker{}, nil
	}
	if err != nil {
		return stepMarker{}, fmt.Errorf("checkpoint: run %q step %d: read completion marker: %w", run, step, err)
	}
	m, ok := parseMarker(b)
	if !ok {
		return stepMarker{}, fmt.Errorf("checkpoint: run %q step %d: %w", run, step, corrupt("completion marker holds %q, not a world size and an incarnation", b))
	}
	return m, nil
}

// parseMarker reads what markerBytes wrote; false if b is not a marker.
func parseMarker(b []byte) (stepMarker, bool) {
	f := strings.Fields(string(b))
	if len(f) < 1 || len(f) > 2 {
		return stepMarker{}, false
	}
	w, err := strconv.Atoi(f[0])
	if err != nil || w < 1 {
		return stepMarker{}, false
	}
	m := stepMarker{world: w}
	if len(f) == 2 {
		if CheckIncarnation(f[1]) != nil {
			return stepMarker{}, false
		}
		m.incarnation = f[1]
	}
	return m, true
}

// assessKind reads everything stored for a step and judges it as states of
// kind k. The info names the step and says why it is not complete even
// when reading failed.
func assessKind[S, M any](ctx context.Context, s *store, k kind[S, M], run string, step int64) (StepInfo, M, error) {
	var zero M
	failed := func(err error) (StepInfo, M, error) {
		return StepInfo{Step: step, Reason: err.Error()}, zero, err
	}
	rankNos, hasMarker, err := s.listStep(ctx, run, step)
	if err != nil {
		return failed(fmt.Errorf("checkpoint: run %q step %d: list in %s: %w", run, step, s.name, err))
	}
	marker, markerErr := stepMarker{world: noMarker}, error(nil)
	if s.keys.MarkerKey(run, step) != "" {
		marker.world = 0
		if hasMarker {
			marker, markerErr = s.readMarker(ctx, run, step)
		}
	}
	ranks := s.readRanks(ctx, run, step, rankNos)
	if err := ctx.Err(); err != nil {
		return failed(err)
	}
	info, merged, err := judgeStep(k, run, step, ranks, marker)
	if markerErr != nil {
		info.Complete, info.Reason = false, markerErr.Error()
		return info, zero, markerErr
	}
	return info, merged, err
}

// judgeStep decides whether a step is complete and, if so, merges it. ranks
// must be in ascending rank order. The error says why the step is not
// complete; info describes the step either way.
//
// The step is the incarnation's that its marker names or, where there is
// no marker, that its lowest rank's state names. States of other
// incarnations are a dead start's leftovers: at a rank below the world
// size they keep the step incomplete until this start saves that rank
// (over them), and above it, where a start of a larger world size left
// them, they are no part of the step.
func judgeStep[S, M any](k kind[S, M], run string, step int64, ranks []storedRank, marker stepMarker) (info StepInfo, merged M, err error) {
	var zero M
	info.Step = step
	where := fmt.Sprintf("run %q step %d", run, step)
	fail := func(e error) (StepInfo, M, error) {
		info.Complete = false
		info.Reason = strings.TrimLeft(strings.TrimPrefix(e.Error(), "checkpoint: "+where), ": ")
		return info, zero, e
	}
	if len(ranks) == 0 {
		if marker.world > 0 {
			return fail(fmt.Errorf("checkpoint: %s: %w: a completion marker but no states", where, trimPrefix(ErrIncomplete)))
		}
		return fail(fmt.Errorf("checkpoint: %s: %w: no states", where, trimPrefix(ErrNotFound)))
	}
	states := make([]S, 0, len(ranks))
	var firstErr error
	for _, sr := range ranks {
		info.Ranks = append(info.Ranks, sr.rank)
		st, err := k.decode(run, step, sr)
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
	firstRank, _, inc := k.meta(&states[0])
	if marker.world > 0 {
		inc = marker.incarnation
	}
	info.Incarnation = inc
	var own []S
	others := map[int]string{} // rank: the incarnation of its state, where not inc
	world, worldRank := 0, 0
	for i := range states {
		r, w, stInc := k.meta(&states[i])
		if stInc != inc {
			others[r] = stInc
			continue
		}
		if len(own) > 0 && w != world {
			return fail(fmt.Errorf("checkpoint: %s: %w: field world_size: rank %d has %d, rank %d has %d",
				where, trimPrefix(ErrMismatch), worldRank, world, r, w))
		}
		if len(own) == 0 {
			world, worldRank = w, r
		}
		own = append(own, states[i])
	}
	if len(own) == 0 {
		return fail(fmt.Errorf("checkpoint: %s: %w: the completion marker is incarnation %q's, and no rank holds its state (rank %d holds %q's)",
			where, trimPrefix(ErrIncomplete), inc, firstRank, others[firstRank]))
	}
	info.WorldSize = world
	if len(own) != world {
		// Ranks above world belong to a larger world's start; the ranks
		// listed are ascending, each once.
		present := make([]bool, world)
		for i := range own {
			if r, _, _ := k.meta(&own[i]); r < world {
				present[r] = true
			}
		}
		var missing, dead []int
		for r := range world {
			if !present[r] {
				missing = append(missing, r)
				if _, ok := others[r]; ok {
					dead = append(dead, r)
				}
			}
		}
		msg := fmt.Sprintf("ranks %v of world size %d are missing", missing, world)
		if len(dead) > 0 {
			msg += fmt.Sprintf(" (of incarnation %q: ranks %v hold another start's states, incarnation %q)", inc, dead, others[dead[0]])
		}
		return fail(fmt.Errorf("checkpoint: %s: %w: %s", where, trimPrefix(ErrIncomplete), msg))
	}
	if marker.world != noMarker && marker.world != world {
		if marker.world == 0 {
			return fail(fmt.Errorf("checkpoint: %s: %w: no completion marker", where, trimPrefix(ErrIncomplete)))
		}
		return fail(fmt.Errorf("checkpoint: %s: %w: field world_size: completion marker says %d, states say %d",
			where, trimPrefix(ErrMismatch), marker.world, world))
	}
	merged, err = k.merge(own...)
	if err != nil {
		return fail(fmt.Errorf("checkpoint: %s: %w", where, trimPrefix(err)))
	}
	info.Complete = true
	return info, merged, nil
}
