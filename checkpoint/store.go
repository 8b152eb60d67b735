package checkpoint

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"
)

// Store keeps the states that the ranks of training runs save at steps, and
// finds the newest step a run can resume from.
//
// A run is a name chosen by the caller; a step is a non-negative training
// step number; a rank saves its own state for a step, and a step is complete
// once every rank 0..WorldSize-1 of it is stored, decodes, was saved by one
// incarnation (State.Incarnation: one start of the job) and agrees with the
// others on the dataset, order and world size (so that Merge accepts them).
// A rank's state of another incarnation at a step, a dead start's leftover,
// keeps the step incomplete until this start saves that rank over it. Implementations are safe for concurrent use, also by several
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
	// Abandon deletes what rank saved at steps after step `after`, and the
	// completion markers of those steps: what a start of the job that died
	// left beyond the step a new start resumes from (after -1: every step).
	// A rank calls it when it resumes, before it saves again; otherwise the
	// new start's states and the dead start's could complete a step
	// together, each from another history, and resuming from it would
	// repeat or skip rows. Checkpointer.Resume calls it.
	Abandon(ctx context.Context, run string, rank int, after int64) error
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
	// Incarnation is the start of the job the step is judged as: the one
	// its completion marker names, or else its lowest rank's state's.
	Incarnation string
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
// bucket store makes the run a path segment and pebblestore's layout ends it
// with a NUL, so separators and control characters are refused (see Layout).
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

// store is the one implementation of Store. It keeps states in a backend
// under the keys of a layout; BucketStore, BackendStore (and through it
// package pebblestore's store) are this store over their backends, so that
// every store judges steps, falls back and cleans up alike.
type store struct {
	b    Backend
	keys Layout
	// name names the store in errors, such as `store "ckpt"`.
	name string

	// mu is held for reading by every call and for writing by Close, so
	// Close waits for calls in flight and none starts afterwards.
	mu     sync.RWMutex
	closed bool
}

// BackendStore is the Store that NewStore makes: states kept in a Backend
// under the keys of a Layout, and KV namespaces beside them where the layout
// has room for them. It is how a store outside this package (such as
// pebblestore's) gets the behaviour every sluice store shares, by supplying
// only the bytes and the key names. All methods are safe for concurrent use.
type BackendStore struct {
	store
}

var _ Store = (*BackendStore)(nil)

// NewStore returns a store that keeps its states in b under the keys of l.
// name says which store it is in errors, such as `store "ckpt"`; it is shown
// as is, so it must hold no credentials. The store owns b: Close closes it,
// after the calls in flight.
func NewStore(b Backend, l Layout, name string) *BackendStore {
	return &BackendStore{store{b: b, keys: l, name: name}}
}

// KV returns the key-value space called namespace in the store's backend,
// apart from the checkpoints and from every other namespace. Namespace names
// follow the rules of run names. Writes are as durable as the backend's Put.
// The KV is usable until the store is closed; it fails if the layout has no
// namespaces.
func (s *BackendStore) KV(namespace string) (KV, error) {
	if err := checkRun(namespace); err != nil {
		return nil, fmt.Errorf("checkpoint: namespace: %w", trimPrefix(err))
	}
	prefix := s.keys.NamespacePrefix(namespace)
	if prefix == "" {
		return nil, fmt.Errorf("checkpoint: namespace %q: %s keeps no namespaces", namespace, s.name)
	}
	return &kvSpace{s: &s.store, name: namespace, prefix: prefix}, nil
}

// KV is a small key-value space for other sluice data that should live and
// move with the checkpoints (a plan cache, say). Keys and values are opaque
// bytes; a missing key gives an error wrapping ErrNotFound.
type KV interface {
	// Get returns a copy of the value of key.
	Get(ctx context.Context, key []byte) ([]byte, error)
	// Set stores value under key, replacing any value it had.
	Set(ctx context.Context, key, value []byte) error
	// Delete removes key; removing a missing key is not an error.
	Delete(ctx context.Context, key []byte) error
}

// readParallel is how many states are read at once when loading a step: a
// step of a large job has hundreds or thousands, and in a bucket the
// latency of each read would add up if they were read one at a time. A
// step of 1,024 ranks is 16 rounds of reads (0.7 s to judge at 20 ms a
// request, where 16 at once took 2.4 s: bench scenario scale_1024).
const readParallel = 64

// Close implements Store.
func (s *store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	if err := s.b.Close(); err != nil {
		return fmt.Errorf("checkpoint: close %s: %w", s.name, err)
	}
	return nil
}

// enter starts a call: it fails once the store is closed or the context is
// done. On success the caller must call s.mu.RUnlock.
func (s *store) enter(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return fmt.Errorf("%w: %s", ErrClosed, s.name)
	}
	return nil
}

// Save implements Store. In a layout with markers, whoever saves the last
// missing rank of a step writes its marker, after listing the step and
// finding every rank of the world size there.
func (s *store) Save(ctx context.Context, run string, step int64, rank int, st State) error {
	if err := checkSave(run, step, rank, &st); err != nil {
		return err
	}
	b, err := Encode(st)
	if err != nil {
		return fmt.Errorf("checkpoint: save run %q step %d rank %d: %w", run, step, rank, trimPrefix(err))
	}
	return s.put(ctx, "save", run, step, rank, stepMarker{st.WorldSize, st.Incarnation}, b, true)
}

// put stores the encoded state of one rank (of a dataset or a mix, as verb
// says in errors) and, in a layout with markers, writes the step's marker,
// naming m's world and incarnation (the state's), if every rank of that
// world is now there. Some of them may be a dead start's, which the listing cannot tell:
// the marker is then early, and the step stays incomplete (judgeStep reads
// each rank's incarnation) until this start saves the last of them, whose
// saver writes the marker again.
func (s *store) put(ctx context.Context, verb, run string, step int64, rank int, m stepMarker, b []byte, summary bool) error {
	world, incarnation := m.world, m.incarnation
	if err := s.enter(ctx); err != nil {
		return err
	}
	defer s.mu.RUnlock()
	where := fmt.Sprintf("run %q step %d rank %d in %s", run, step, rank, s.name)
	if err := s.b.Put(ctx, s.keys.RankKey(run, step, rank), b); err != nil {
		return fmt.Errorf("checkpoint: %s %s: %w", verb, where, err)
	}
	marker := s.keys.MarkerKey(run, step)
	if marker == "" {
		return nil
	}
	all, err := s.allStored(ctx, run, step, world)
	if err != nil {
		return fmt.Errorf("checkpoint: %s %s: list step: %w", verb, where, err)
	}
	if !all {
		return nil // a rank still to come writes the marker
	}
	if summary {
		s.summarize(ctx, run, step, world, incarnation)
	}
	if err := s.b.Put(ctx, marker, markerBytes(world, incarnation)); err != nil {
		return fmt.Errorf("checkpoint: %s %s: write completion marker: %w", verb, where, err)
	}
	return nil
}

// allStored reports whether a state of every rank of world is stored at
// the step. It walks the step's listing (in ascending byte order, as
// Backend.List yields it) beside the ranks' keys in the same order, and
// stops at the first key the listing passes by: every rank lists the step
// once it has saved, and while many ranks are still to come the first
// missing one is among the first keys (the bucket backend's first page is
// small), so that savers spread in time list some W log W keys of a step
// of W ranks in all rather than W². Savers that all list once every state
// is there each list the whole step still.
func (s *store) allStored(ctx context.Context, run string, step int64, world int) (bool, error) {
	want := make([]string, world)
	for r := range want {
		want[r] = s.keys.RankKey(run, step, r)
	}
	slices.Sort(want)
	i := 0
	for key, err := range s.b.List(ctx, s.keys.StepPrefix(run, step), s.keys.Delim()) {
		if err != nil {
			return false, err
		}
		if key > want[i] {
			return false, nil // want[i] would have come before key
		}
		if key == want[i] {
			if i++; i == len(want) {
				return true, nil
			}
		}
	}
	return false, nil
}

// Load implements Store.
func (s *store) Load(ctx context.Context, run string, step int64, rank int) (State, error) {
	if err := checkRank(run, step, rank); err != nil {
		return State{}, err
	}
	if err := s.enter(ctx); err != nil {
		return State{}, err
	}
	defer s.mu.RUnlock()
	b, err := s.b.Get(ctx, s.keys.RankKey(run, step, rank))
	if errors.Is(err, ErrNotFound) {
		return State{}, fmt.Errorf("checkpoint: run %q step %d rank %d: %w", run, step, rank, trimPrefix(ErrNotFound))
	}
	return decodeStored(run, step, storedRank{rank: rank, data: b, err: err})
}

// LoadStep implements Store. In a layout with markers, a step whose marker
// is missing is incomplete even when every rank is there: the saver of the
// last rank may have failed before writing it.
func (s *store) LoadStep(ctx context.Context, run string, step int64) (State, error) {
	if err := checkStep(run, step); err != nil {
		return State{}, err
	}
	if err := s.enter(ctx); err != nil {
		return State{}, err
	}
	defer s.mu.RUnlock()
	if merged, ok := s.summarized(ctx, run, step); ok {
		return merged, nil
	}
	_, merged, err := s.assess(ctx, run, step)
	return merged, err
}

// summarized returns the step merged from its summary, where its marker
// and summary say it is complete (see summarize); false where they do not,
// and the step is judged from its states.
func (s *store) summarized(ctx context.Context, run string, step int64) (State, bool) {
	if key, _ := s.summaryKeys(run, step); key == "" {
		return State{}, false
	}
	m, err := s.readMarker(ctx, run, step)
	if err != nil {
		return State{}, false
	}
	return s.readSummary(ctx, run, step, m)
}

// Latest implements Store. It lists the run's steps and reads them from the
// newest back, stopping at the first complete one; in a layout with markers
// it reads a step's states only once its marker is found.
func (s *store) Latest(ctx context.Context, run string) (int64, error) {
	if err := checkRun(run); err != nil {
		return 0, err
	}
	if err := s.enter(ctx); err != nil {
		return 0, err
	}
	defer s.mu.RUnlock()
	return s.newest(ctx, "run", run, func(step int64) error {
		return s.judgeNewest(ctx, run, step, func(m stepMarker) error {
			if _, ok := s.readSummary(ctx, run, step, m); ok {
				return nil
			}
			info, _, err := s.assess(ctx, run, step)
			if err == nil && !info.Complete {
				err = ErrIncomplete
			}
			return err
		})
	})
}

// judgeNewest judges a step for Latest and LatestMix: in a layout with
// markers, a step without one was never finished, and its states need not
// be read.
func (s *store) judgeNewest(ctx context.Context, run string, step int64, judge func(stepMarker) error) error {
	m := stepMarker{world: noMarker}
	if s.keys.MarkerKey(run, step) != "" {
		var err error
		if m, err = s.readMarker(ctx, run, step); err != nil {
			return err
		}
		if m.world == 0 {
			return ErrIncomplete
		}
	}
	return judge(m)
}

// newest returns the newest step of a run that judge finds complete (nil),
// passing over steps it finds incomplete, corrupt or inconsistent. kind
// names the run in errors ("run" or "mix run").
func (s *store) newest(ctx context.Context, kind, run string, judge func(step int64) error) (int64, error) {
	steps, err := s.listSteps(ctx, run)
	if err != nil {
		return 0, err
	}
	// The newest damaged step, if no complete step is left to fall back
	// to: a run whose saved steps are all damaged has lost its position,
	// which is not the same as never having saved one.
	var damaged error
	for _, step := range slices.Backward(steps) {
		err := judge(step)
		if err == nil {
			return step, nil
		}
		if cerr := ctx.Err(); cerr != nil {
			return 0, cerr
		}
		if !skippable(err) {
			return 0, err
		}
		damaged = cmp.Or(damaged, damage(err))
	}
	if damaged != nil {
		return 0, fmt.Errorf("checkpoint: %s %q has no complete step left that can be read: %w", kind, run, damaged)
	}
	return 0, fmt.Errorf("checkpoint: %s %q has no complete step: %w", kind, run, trimPrefix(ErrNotFound))
}

// damage returns err if it says a step was saved and then damaged (corrupt,
// or ranks that disagree), and nil if the step was only never finished.
func damage(err error) error {
	if errors.Is(err, ErrCorrupt) || errors.Is(err, ErrMismatch) {
		return err
	}
	return nil
}

// List implements Store.
func (s *store) List(ctx context.Context, run string) ([]StepInfo, error) {
	if err := checkRun(run); err != nil {
		return nil, err
	}
	if err := s.enter(ctx); err != nil {
		return nil, err
	}
	defer s.mu.RUnlock()
	return listKind(ctx, s, datasetKind, run)
}

// listKind describes every step of a run, judged as states of kind k.
func listKind[S, M any](ctx context.Context, s *store, k kind[S, M], run string) ([]StepInfo, error) {
	steps, err := s.listSteps(ctx, run)
	if err != nil {
		return nil, err
	}
	infos := make([]StepInfo, 0, len(steps))
	for _, step := range steps {
		info, _, _ := assessKind(ctx, s, k, run, step)
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		infos = append(infos, info)
	}
	return infos, nil
}

// Delete implements Store.
func (s *store) Delete(ctx context.Context, run string, step int64) error {
	if err := checkStep(run, step); err != nil {
		return err
	}
	if err := s.enter(ctx); err != nil {
		return err
	}
	defer s.mu.RUnlock()
	keys, err := s.stepKeys(ctx, run, step, nil)
	if err == nil {
		err = s.b.Delete(ctx, keys)
	}
	if err != nil {
		return fmt.Errorf("checkpoint: delete run %q step %d in %s: %w", run, step, s.name, err)
	}
	return nil
}

// Retain implements Store. The older steps go in one call to the backend,
// which pebblestore's backend makes one synced batch.
func (s *store) Retain(ctx context.Context, run string, keep int) error {
	if err := checkKeep(run, keep); err != nil {
		return err
	}
	if err := s.enter(ctx); err != nil {
		return err
	}
	defer s.mu.RUnlock()
	steps, err := s.listSteps(ctx, run)
	if err != nil {
		return err
	}
	// Judged from the newest back, each from its summary where it has one,
	// until keep are complete: the steps older than those are deleted
	// unjudged. A rank that keeps the newest few steps of a job of W ranks
	// then reads a few objects a step, not W.
	infos := make([]StepInfo, len(steps))
	kept := 0
	for i := len(steps) - 1; i >= 0; i-- {
		infos[i].Step = steps[i]
		if kept == keep {
			continue
		}
		_, infos[i].Complete = s.summarized(ctx, run, steps[i])
		if !infos[i].Complete {
			infos[i], _, _ = s.assess(ctx, run, steps[i])
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if infos[i].Complete {
			kept++
		}
	}
	return s.retain(ctx, "run", run, infos, keep)
}

// retain deletes, in one call to the backend, every step of infos older
// than the oldest of the newest keep complete ones. kind names the run in
// errors ("run" or "mix run").
func (s *store) retain(ctx context.Context, kind, run string, infos []StepInfo, keep int) error {
	oldest, ok := pickRetained(infos, keep)
	if !ok {
		return nil
	}
	var (
		keys []string
		err  error
	)
	for _, info := range infos {
		if info.Step >= oldest {
			break
		}
		if keys, err = s.stepKeys(ctx, run, info.Step, keys); err != nil {
			break
		}
	}
	if err == nil && len(keys) > 0 {
		err = s.b.Delete(ctx, keys)
	}
	if err != nil {
		return fmt.Errorf("checkpoint: retain %s %q: delete steps before %d in %s: %w", kind, run, oldest, s.name, err)
	}
	return nil
}

// Abandon implements Store. Markers go before states, so a deletion that
// fails halfway leaves steps incomplete rather than complete with a state
// of another start in them.
func (s *store) Abandon(ctx context.Context, run string, rank int, after int64) error {
	if err := checkRank(run, max(after, 0), rank); err != nil {
		return err
	}
	if after < -1 {
		return fmt.Errorf("checkpoint: abandon run %q rank %d: step %d is before -1", run, rank, after)
	}
	if err := s.enter(ctx); err != nil {
		return err
	}
	defer s.mu.RUnlock()
	fail := func(err error) error {
		return fmt.Errorf("checkpoint: abandon run %q rank %d after step %d in %s: %w", run, rank, after, s.name, err)
	}
	steps, err := s.listSteps(ctx, run)
	if err != nil {
		return err
	}
	var markers, summaries, states []string
	for _, step := range steps {
		if step <= after {
			continue
		}
		ranks, marker, err := s.listStep(ctx, run, step)
		if err != nil {
			return fail(err)
		}
		if marker {
			markers = append(markers, s.keys.MarkerKey(run, step))
		}
		if summary, claim := s.summaryKeys(run, step); summary != "" {
			// After the marker, before the states: the step's next states
			// are judged again.
			summaries = append(summaries, summary, claim)
		}
		if _, ok := slices.BinarySearch(ranks, rank); ok {
			states = append(states, s.keys.RankKey(run, step, rank))
		}
	}
	if len(markers)+len(states) == 0 {
		return nil
	}
	if err := s.b.Delete(ctx, slices.Concat(markers, summaries, states)); err != nil {
		return fail(err)
	}
	return nil
}

// stepKeys appends to keys every key under a step, its marker first: a step
// whose deletion fails halfway is then incomplete rather than complete with
// ranks missing. Keys the store did not write go too, as the step's prefix
// is the store's.
func (s *store) stepKeys(ctx context.Context, run string, step int64, keys []string) ([]string, error) {
	marker := s.keys.MarkerKey(run, step)
	if marker != "" {
		keys = append(keys, marker)
	}
	for key, err := range s.b.List(ctx, s.keys.StepPrefix(run, step), "") {
		if err != nil {
			return keys, err
		}
		if key != marker {
			keys = append(keys, key)
		}
	}
	return keys, nil
}

// listSteps returns the steps of a run, ascending. Keys the layout does not
// produce are ignored.
func (s *store) listSteps(ctx context.Context, run string) ([]int64, error) {
	prefix := s.keys.RunPrefix(run)
	var steps []int64
	for key, err := range s.b.List(ctx, prefix, s.keys.Delim()) {
		if err != nil {
			return nil, fmt.Errorf("checkpoint: list run %q in %s: %w", run, s.name, err)
		}
		// A layout without a delimiter lists every rank of a step, one
		// after another.
		if step, ok := s.keys.ParseStep(key[len(prefix):]); ok && (len(steps) == 0 || steps[len(steps)-1] != step) {
			steps = append(steps, step)
		}
	}
	slices.Sort(steps)
	return slices.Compact(steps), nil
}

// listStep returns the ranks stored for a step, ascending, and whether the
// step has a marker.
func (s *store) listStep(ctx context.Context, run string, step int64) (ranks []int, marker bool, err error) {
	prefix := s.keys.StepPrefix(run, step)
	markerKey := s.keys.MarkerKey(run, step)
	for key, err := range s.b.List(ctx, prefix, s.keys.Delim()) {
		if err != nil {
			return nil, false, err
		}
		if markerKey != "" && key == markerKey {
			marker = true
		} else if r, ok := s.keys.ParseRank(key[len(prefix):]); ok {
			ranks = append(ranks, r)
		}
	}
	slices.Sort(ranks)
	return ranks, marker, nil
}

// assess reads everything stored for a step and judges it as datasets'
// states.
func (s *store) assess(ctx context.Context, run string, step int64) (StepInfo, State, error) {
	return assessKind(ctx, s, datasetKind, run, step)
}

// readRanks reads the states of a step's ranks, readParallel at a time.
func (s *store) readRanks(ctx context.Context, run string, step int64, rankNos []int) []storedRank {
	out := make([]storedRank, len(rankNos))
	sem := make(chan struct{}, readParallel)
	var wg sync.WaitGroup
	for i, r := range rankNos {
		out[i].rank = r
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			b, err := s.b.Get(ctx, s.keys.RankKey(run, step, r))
			if errors.Is(err, ErrNotFound) {
				err = fmt.Errorf("vanished while being read: %w", trimPrefix(ErrNotFound))
			}
			out[i].data, out[i].err = b, err
		})
	}
	wg.Wait()
	return out
}

// kvSpace is a KV under a prefix of a store's backend.
type kvSpace struct {
	s      *store
	name   string
	prefix string
}

func (kv *kvSpace) Get(ctx context.Context, key []byte) ([]byte, error) {
	if err := kv.s.enter(ctx); err != nil {
		return nil, err
	}
	defer kv.s.mu.RUnlock()
	v, err := kv.s.b.Get(ctx, kv.prefix+string(key))
	if errors.Is(err, ErrNotFound) {
		return nil, fmt.Errorf("checkpoint: namespace %q key %q: %w", kv.name, key, trimPrefix(ErrNotFound))
	}
	if err != nil {
		return nil, fmt.Errorf("checkpoint: namespace %q key %q in %s: %w", kv.name, key, kv.s.name, err)
	}
	return v, nil
}

func (kv *kvSpace) Set(ctx context.Context, key, value []byte) error {
	if err := kv.s.enter(ctx); err != nil {
		return err
	}
	defer kv.s.mu.RUnlock()
	if err := kv.s.b.Put(ctx, kv.prefix+string(key), value); err != nil {
		return fmt.Errorf("checkpoint: namespace %q key %q in %s: %w", kv.name, key, kv.s.name, err)
	}
	return nil
}

func (kv *kvSpace) Delete(ctx context.Context, key []byte) error {
	if err := kv.s.enter(ctx); err != nil {
		return err
	}
	defer kv.s.mu.RUnlock()
	if err := kv.s.b.Delete(ctx, []string{kv.prefix + string(key)}); err != nil {
		return fmt.Errorf("checkpoint: namespace %q key %q in %s: %w", kv.name, key, kv.s.name, err)
	}
	return nil
}

// storedRank is one rank's stored bytes for a step, as read, not yet decoded.
type storedRank struct {
	rank int
	data []byte
	err  error // a failure to read the bytes, other than their absence
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

// decodeStoredOwn is decodeStored giving the state's own entries (see
// own).
func decodeStoredOwn(run string, step int64, sr storedRank) (own, error) {
	where := fmt.Sprintf("run %q step %d rank %d", run, step, sr.rank)
	if sr.err != nil {
		return own{}, fmt.Errorf("checkpoint: %s: %w", where, sr.err)
	}
	o, err := decodeOwn(sr.data)
	if err != nil {
		return own{}, fmt.Errorf("checkpoint: %s: %w", where, trimPrefix(err))
	}
	if o.head.Rank != sr.rank {
		return own{}, fmt.Errorf("checkpoint: %s: %w", where, corrupt("holds the state of rank %d", o.head.Rank))
	}
	return o, nil
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
