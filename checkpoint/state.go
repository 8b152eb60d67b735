// Package checkpoint holds a stream's resumable state, its versioned encoding
// and the stores that keep it between runs: the store in a bucket here, the
// embedded pebble store in package pebblestore (apart, so that importing this
// package links no pebble), and NewStore, the one implementation both are,
// for any other Backend.
package checkpoint

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"

	"github.com/sluicedata/sluice/split"
)

// StateVersion is the version of the State layout written by this code.
// Encodings of older versions are upgraded on decode where that is possible.
const StateVersion = 6

// ErrMismatch is wrapped by every error that refuses a state because it was
// taken from another dataset, order or step.
var ErrMismatch = errors.New("checkpoint: state does not match")

// State is a stream's position at a batch boundary: enough to resume with no
// row repeated or skipped, also on another world size.
//
// A state counts the rows the consumer has taken, never rows read ahead.
// The fields between Plan and DropRemainder are the inputs that decide which
// rows come and in which order; Fingerprint hashes all of them so a mismatch is
// caught even when a field is added later, and the fields themselves are kept
// so that a refusal can name what differs.
type State struct {
	// Version is the State layout version (StateVersion when written here).
	Version int `msgpack:"version" json:"version"`
	// Fingerprint hashes Plan and every order option below.
	Fingerprint string `msgpack:"fingerprint" json:"fingerprint"`
	// Plan hashes the chunk list: files, sizes, row groups and chunk bounds.
	Plan          string   `msgpack:"plan" json:"plan"`
	Columns       []string `msgpack:"columns" json:"columns"`
	Seed          uint64   `msgpack:"seed" json:"seed"`
	Epoch         int64    `msgpack:"epoch" json:"epoch"`
	Shuffle       bool     `msgpack:"shuffle" json:"shuffle"`
	ClumpSize     int      `msgpack:"clump_size" json:"clump_size"`
	ShuffleWindow int      `msgpack:"shuffle_window" json:"shuffle_window"`
	NumSplits     int      `msgpack:"num_splits" json:"num_splits"`
	DropRemainder bool     `msgpack:"drop_remainder" json:"drop_remainder"`

	// WorldSize and Rank say which splits this state speaks for: split s is
	// owned by rank s mod WorldSize. A merged state has Rank -1 and speaks for
	// every split.
	WorldSize int `msgpack:"world_size" json:"world_size"`
	Rank      int `msgpack:"rank" json:"rank"`
	// Cursors has one entry per split (len NumSplits). In a rank's state
	// only those of the splits it speaks for are read (a dataset leaves
	// the others zero), and a state of many splits is written with those
	// only (see Encode).
	Cursors []Cursor `msgpack:"cursors" json:"cursors"`
	// Next is the rank's round-robin position: the index, among the splits
	// the rank owns in ascending order, of the split its next batch comes from.
	Next int `msgpack:"next" json:"next"`
	// Skipped counts, per split (len NumSplits, or nil for none), the rows
	// left out as bad (a text format's BadRowsSkip) in the windows the
	// consumer finished, over every epoch of the job so far: a window is
	// counted once it is finished, so one resumed in its middle is read
	// again and counted then, never twice. Added in version 2; a state
	// without skipped rows is still written as version 1.
	Skipped []int64 `msgpack:"skipped" json:"skipped,omitempty"`
	// Epochs has, where not nil, each split's epoch (len NumSplits): the
	// epoch its cursor counts rows of. Splits differ in epoch where ranks
	// were merged at an epoch's boundary: a rank whose loop ended is in the
	// next epoch while another still finishes the last, and each split
	// resumes in its own, while Epoch, the epoch a dataset that loads the
	// state iterates first, is the least of the ranks'. nil means every
	// split is in Epoch. No entry is before Epoch; those of splits the
	// state does not speak for are Epoch. Added in version 3.
	Epochs []int64 `msgpack:"epochs" json:"epochs,omitempty"`
	// Incarnation names the start of the job that saved the state (see
	// stream.Checkpointer.Incarnation): a store completes a step only with
	// every rank's state of one incarnation, so that a restarted job never
	// resumes from a step that a dead start's leftovers helped complete.
	// "" for none, as every state before version 3. Up to
	// MaxIncarnation bytes of printable ASCII, no spaces. Added in version 3.
	Incarnation string `msgpack:"incarnation" json:"incarnation,omitempty"`
	// BatchSize and BatchesLeft are set in a rank's state taken with equal
	// batches per rank (stream.Options.EqualBatches): every rank of the step
	// has BatchesLeft batches of BatchSize rows left in the epoch. A merged
	// state's cursors tell every rank's rows, but a rank's own state tells
	// only its own, so it carries the count that every rank shares; a merge
	// carries none. 0 BatchSize: not counted. Added in version 4; a state
	// without them is still written in an older version.
	BatchSize   int   `msgpack:"batch_size" json:"batch_size,omitempty"`
	BatchesLeft int64 `msgpack:"batches_left" json:"batches_left,omitempty"`
	// ShufflePasses is an order option (stream.Options.ShufflePasses): the
	// times an epoch reads every chunk, each pass keeping a disjoint part of
	// its rows. 0 for one pass, as every state before version 5; Fingerprint
	// covers it only where it is above one, so that a state of one pass has
	// the fingerprint it always had. Added in version 5; a state of one
	// pass is still written in an older version.
	ShufflePasses int `msgpack:"shuffle_passes" json:"shuffle_passes,omitempty"`
}

// MaxIncarnation is the longest incarnation a state carries, in bytes.
const MaxIncarnation = 128

// CheckIncarnation returns an error if inc cannot be an incarnation: longer
// than MaxIncarnation, or holding a space or a byte that is not printable
// ASCII (it is written into the completion marker of a bucket store's
// step, on one line).
func CheckIncarnation(inc string) error {
	if len(inc) > MaxIncarnation {
		return fmt.Errorf("checkpoint: incarnation of %d bytes is longer than %d", len(inc), MaxIncarnation)
	}
	for i := range len(inc) {
		if c := inc[i]; c <= ' ' || c > '~' {
			return fmt.Errorf("checkpoint: incarnation %q holds byte %#x at %d: only printable ASCII without spaces", inc, c, i)
		}
	}
	return nil
}

// Cursor is how far the consumer got in one split this epoch: a window and
// the rows of it delivered (see split.Cursor).
type Cursor = split.Cursor

// Owns reports whether the state speaks for split s.
func (s *State) Owns(split int) bool {
	return s.Rank < 0 || (s.WorldSize > 0 && split%s.WorldSize == s.Rank)
}

// Clone returns a deep copy.
func (s State) Clone() State {
	s.Columns = slices.Clone(s.Columns)
	s.Cursors = slices.Clone(s.Cursors)
	s.Skipped = slices.Clone(s.Skipped)
	s.Epochs = slices.Clone(s.Epochs)
	return s
}

// SplitEpoch is the epoch split's cursor is in.
func (s *State) SplitEpoch(split int) int64 {
	if s.Epochs == nil {
		return s.Epoch
	}
	return s.Epochs[split]
}

// hasEpochs reports whether a split is in another epoch than Epoch: only
// then does a state need Epochs.
func (s *State) hasEpochs() bool {
	for _, e := range s.Epochs {
		if e != s.Epoch {
			return true
		}
	}
	return false
}

// SetEpochs sets each split's epoch (epochs has one per split, of which
// those of the splits the state speaks for count; none before Epoch) in the
// form Validate accepts: Epochs nil where every split is in Epoch, the
// splits the state does not speak for in Epoch.
func (s *State) SetEpochs(epochs []int64) {
	s.Epochs = canonicalEpochs(epochs, s.Epoch, s.Owns)
}

// canonicalEpochs returns the per-split epochs to keep: nil if every owned
// split is in epoch, else one per split with those not owned in epoch.
func canonicalEpochs(epochs []int64, epoch int64, owns func(int) bool) []int64 {
	out := make([]int64, len(epochs))
	differ := false
	for s, e := range epochs {
		out[s] = epoch
		if owns(s) {
			out[s] = e
			differ = differ || e != epoch
		}
	}
	if !differ {
		return nil
	}
	return out
}

// validateEpochs checks Epochs: nil, or one per split, none before Epoch.
func validateEpochs(epochs []int64, epoch int64, splits int, what string) error {
	if epochs == nil {
		return nil
	}
	if len(epochs) != splits {
		return fmt.Errorf("checkpoint: %s has %d split epochs for num_splits %d", what, len(epochs), splits)
	}
	for i, e := range epochs {
		if e < epoch {
			return fmt.Errorf("checkpoint: %s split %d is at epoch %d, before the state's epoch %d", what, i, e, epoch)
		}
	}
	return nil
}

// Validate checks the state's internal consistency: what a decoder or a
// store must refuse before a stream sees it.
func (s *State) Validate() error {
	if err := s.validateHead(len(s.Cursors)); err != nil {
		return err
	}
	for i, c := range s.Cursors {
		if c.Window < 0 || c.Offset < 0 || c.Rows < 0 {
			return fmt.Errorf("checkpoint: state cursor %d is negative", i)
		}
	}
	if err := validateEpochs(s.Epochs, s.Epoch, s.NumSplits, "state"); err != nil {
		return err
	}
	return s.validateSkipped()
}

// validateHead checks what Validate checks but the per-split lists'
// entries: every field of one value, and, unless cursors is negative, that
// the state holds cursors cursors, one per split.
func (s *State) validateHead(cursors int) error {
	switch {
	case s.Version < 1 || s.Version > StateVersion:
		return fmt.Errorf("checkpoint: state version %d is not supported (this build reads 1 to %d)", s.Version, StateVersion)
	case s.NumSplits < 1:
		return fmt.Errorf("checkpoint: state num_splits %d must be at least 1", s.NumSplits)
	case cursors >= 0 && cursors != s.NumSplits:
		return fmt.Errorf("checkpoint: state has %d cursors for num_splits %d", cursors, s.NumSplits)
	case s.Rank >= 0 && (s.WorldSize < 1 || s.Rank >= s.WorldSize):
		return fmt.Errorf("checkpoint: state rank %d is outside world_size %d", s.Rank, s.WorldSize)
	case s.Rank < -1:
		return fmt.Errorf("checkpoint: state rank %d is invalid", s.Rank)
	case s.WorldSize > 0 && s.NumSplits%s.WorldSize != 0:
		return fmt.Errorf("checkpoint: state num_splits %d is not a multiple of world_size %d", s.NumSplits, s.WorldSize)
	case s.Next < 0:
		return fmt.Errorf("checkpoint: state next %d is negative", s.Next)
	case s.Rank >= 0 && s.Next >= s.NumSplits/s.WorldSize:
		// Next indexes the splits the rank owns; a position past them is a
		// state from somewhere else, not one to resume modulo.
		return fmt.Errorf("checkpoint: state next %d is past the %d splits rank %d of %d owns", s.Next, s.NumSplits/s.WorldSize, s.Rank, s.WorldSize)
	case s.ClumpSize < 0 || s.ShuffleWindow < 0 || s.Epoch < 0 || s.ShufflePasses < 0:
		return fmt.Errorf("checkpoint: state has a negative order option")
	case s.BatchSize < 0 || s.BatchesLeft < 0 || s.BatchSize == 0 && s.BatchesLeft != 0:
		return fmt.Errorf("checkpoint: state batches_left %d of batch_size %d is invalid", s.BatchesLeft, s.BatchSize)
	}
	return CheckIncarnation(s.Incarnation)
}

// Merge combines the states that all ranks of one job saved at the same step
// into one state that speaks for every split, so the job can resume on any
// world size that divides NumSplits. Every rank must be present exactly once,
// and all must be of one incarnation.
//
// Ranks need not be in one epoch: a rank whose loop ended (its state is at
// the start of the next epoch) or that went on into the next merges with
// ranks still in the last. Each split keeps its own rank's epoch and cursor
// (Epochs), and a dataset that loads the merge delivers each split's rows
// from there: the rest of the older epoch's splits first, then every split
// of the next epoch from where it stands, so no row comes twice or never.
//
// Merge reads, and checks, only each state's entries of the splits it
// speaks for: its cost grows with the splits and the ranks, not with their
// product (a rank's state holds a cursor for every split of the job).
func Merge(states ...State) (State, error) {
	if len(states) == 0 {
		return State{}, fmt.Errorf("checkpoint: merge of no states")
	}
	if first := &states[0]; first.Rank < 0 {
		if err := first.Validate(); err != nil {
			return State{}, err
		}
		if len(states) != 1 {
			return State{}, fmt.Errorf("checkpoint: merge of a merged state with others")
		}
		return first.Clone(), nil
	}
	parts := make([]own, len(states))
	for i := range states {
		p, err := states[i].own()
		if err != nil {
			return State{}, err
		}
		parts[i] = p
	}
	return mergeOwn(parts)
}

// MergeEncoded is Merge of states as Encode wrote them. Each is read as its
// own splits' entries only (a rank's state of many splits is written so,
// see Encode), never as a cursor for every split of the job: merging the
// states of W ranks of S splits then costs in proportion to W plus S,
// where decoding each state whole would cost W times S (at 8,192
// DataLoader workers and as many splits, 67 million cursors). An error
// names the state, by its index, that fails to decode.
func MergeEncoded(states ...[]byte) (State, error) {
	parts := make([]own, len(states))
	for i, b := range states {
		o, err := decodeOwn(b)
		if err != nil {
			return State{}, fmt.Errorf("checkpoint: state %d of %d: %w", i, len(states), trimPrefix(err))
		}
		parts[i] = o
	}
	return mergeOwn(parts)
}

// SameOrder returns an error naming the first field in which b differs from a
// among those that decide which rows come and in which order. Epoch, cursors
// and ownership are positions, not order, and are not compared.
func SameOrder(a, b *State) error {
	mismatch := func(field string, want, got any) error {
		return fmt.Errorf("%w: field %s: dataset has %v, state has %v", ErrMismatch, field, want, got)
	}
	switch {
	case a.ShuffleWindow != b.ShuffleWindow:
		// Named before the plan: a window of other rows cuts row groups
		// elsewhere, so the plans differ too, and a window set in bytes
		// (ShuffleMemory) is the rows those bytes hold in this data. The
		// window is what a user can set to resume.
		return fmt.Errorf("%w: field shuffle_window: dataset has %d rows, state has %d; open with ShuffleWindow %d (rows, not ShuffleMemory) to resume it",
			ErrMismatch, a.ShuffleWindow, b.ShuffleWindow, b.ShuffleWindow)
	case a.Plan != b.Plan:
		return mismatch("plan", a.Plan, b.Plan)
	case !slices.Equal(a.Columns, b.Columns):
		return mismatch("columns", a.Columns, b.Columns)
	case a.Seed != b.Seed:
		return mismatch("seed", a.Seed, b.Seed)
	case a.Shuffle != b.Shuffle:
		return mismatch("shuffle", a.Shuffle, b.Shuffle)
	case a.ClumpSize != b.ClumpSize:
		return mismatch("clump_size", a.ClumpSize, b.ClumpSize)
	case a.NumSplits != b.NumSplits:
		return mismatch("num_splits", a.NumSplits, b.NumSplits)
	case a.DropRemainder != b.DropRemainder:
		return mismatch("drop_remainder", a.DropRemainder, b.DropRemainder)
	case max(a.ShufflePasses, 1) != max(b.ShufflePasses, 1):
		return mismatch("shuffle_passes", max(a.ShufflePasses, 1), max(b.ShufflePasses, 1))
	case a.Fingerprint != b.Fingerprint:
		return mismatch("fingerprint", a.Fingerprint, b.Fingerprint)
	}
	return nil
}

// OrderFingerprint hashes Plan and the order options of s. Streams store it in
// Fingerprint; it is a stable hex string for the same inputs on any machine.
func (s *State) OrderFingerprint() string {
	h := sha256.New()
	fmt.Fprintf(h, "plan=%q\ncolumns=%q\nseed=%d\nshuffle=%t\nclump=%d\nwindow=%d\nsplits=%d\ndrop=%t\n",
		s.Plan, s.Columns, s.Seed, s.Shuffle, s.ClumpSize, s.ShuffleWindow, s.NumSplits, s.DropRemainder)
	if s.ShufflePasses > 1 {
		fmt.Fprintf(h, "passes=%d\n", s.ShufflePasses)
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}
