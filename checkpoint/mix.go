package checkpoint

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"math"
	"slices"
)

// MixStateVersion is the newest MixState layout, written where a state
// needs it: version 2 added Epochs and Incarnation, and a state with
// neither is written as version 1, which older builds read.
const MixStateVersion = 2

// MixState is the position of a mix of datasets (stream.Mixed): the rows
// each mixed split delivered this epoch and, per source and split, the rows
// of that source the mix has taken since its start (the source's cursor:
// pass Taken/rows, offset Taken%rows). The interleaving being a pure
// function of the mix's inputs, the sources' cursors follow from the mixed
// position; they are kept so that a load can check them.
type MixState struct {
	Version int `msgpack:"version" json:"version"`
	// Fingerprint hashes the mix's options, weights, and every source's
	// plan and order fingerprint.
	Fingerprint string `msgpack:"fingerprint" json:"fingerprint"`
	Epoch       int64  `msgpack:"epoch" json:"epoch"`
	NumSplits   int    `msgpack:"num_splits" json:"num_splits"`
	// WorldSize and Rank say which mixed splits the state speaks for (split
	// s is rank s mod WorldSize's); a merged state has Rank -1 and speaks
	// for all.
	WorldSize int `msgpack:"world_size" json:"world_size"`
	Rank      int `msgpack:"rank" json:"rank"`
	// Cursors has, per mixed split, the rows delivered this epoch.
	Cursors []int64 `msgpack:"cursors" json:"cursors"`
	// Next is the rank's round-robin position among its mixed splits.
	Next int `msgpack:"next" json:"next"`
	// Taken has, per source, one entry per split: the rows of that split of
	// the source the mix has taken, across passes.
	Taken [][]int64 `msgpack:"taken" json:"taken"`
	// Epochs has, where not nil, each mixed split's epoch, as State.Epochs
	// has a dataset's: states saved at an epoch's boundary merge, each
	// split keeping its own rank's epoch, Epoch the least of the ranks'.
	Epochs []int64 `msgpack:"epochs" json:"epochs,omitempty"`
	// Incarnation names the start of the job that saved the state, as
	// State.Incarnation does.
	Incarnation string `msgpack:"incarnation" json:"incarnation,omitempty"`
}

// Owns reports whether the state speaks for mixed split s.
func (s *MixState) Owns(split int) bool {
	return s.Rank < 0 || (s.WorldSize > 0 && split%s.WorldSize == s.Rank)
}

// SplitEpoch is the epoch mixed split's cursor is in.
func (s *MixState) SplitEpoch(split int) int64 {
	if s.Epochs == nil {
		return s.Epoch
	}
	return s.Epochs[split]
}

// SetEpochs sets each mixed split's epoch, as State.SetEpochs does.
func (s *MixState) SetEpochs(epochs []int64) {
	s.Epochs = canonicalEpochs(epochs, s.Epoch, s.Owns)
}

// hasEpochs reports whether a split is in another epoch than Epoch.
func (s *MixState) hasEpochs() bool {
	return slices.ContainsFunc(s.Epochs, func(e int64) bool { return e != s.Epoch })
}

// maxMixFingerprint bounds the fingerprint a decoded state may carry.
const maxMixFingerprint = 256

// Validate checks the state's internal consistency.
func (s *MixState) Validate() error {
	switch {
	case s.Version < 1 || s.Version > MixStateVersion:
		return fmt.Errorf("checkpoint: mix state version %d is not supported (this build reads 1 to %d)", s.Version, MixStateVersion)
	case s.Fingerprint == "" || len(s.Fingerprint) > maxMixFingerprint:
		return fmt.Errorf("checkpoint: mix state fingerprint of %d bytes (want 1 to %d)", len(s.Fingerprint), maxMixFingerprint)
	case s.NumSplits < 1:
		return fmt.Errorf("checkpoint: mix state num_splits %d must be at least 1", s.NumSplits)
	case len(s.Cursors) != s.NumSplits:
		return fmt.Errorf("checkpoint: mix state has %d cursors for num_splits %d", len(s.Cursors), s.NumSplits)
	case s.WorldSize < 1 || s.NumSplits%s.WorldSize != 0:
		return fmt.Errorf("checkpoint: mix state world_size %d does not divide num_splits %d", s.WorldSize, s.NumSplits)
	case s.Rank < -1 || s.Rank >= s.WorldSize:
		return fmt.Errorf("checkpoint: mix state rank %d is outside world_size %d", s.Rank, s.WorldSize)
	case s.Epoch < 0 || s.Next < 0:
		return fmt.Errorf("checkpoint: mix state epoch %d or next %d is negative", s.Epoch, s.Next)
	case s.Rank >= 0 && s.Next >= s.NumSplits/s.WorldSize:
		return fmt.Errorf("checkpoint: mix state next %d is past the %d splits rank %d of %d owns", s.Next, s.NumSplits/s.WorldSize, s.Rank, s.WorldSize)
	case len(s.Taken) == 0:
		return fmt.Errorf("checkpoint: mix state has no sources")
	}
	for i, c := range s.Cursors {
		if c < 0 {
			return fmt.Errorf("checkpoint: mix state cursor %d is negative", i)
		}
	}
	if err := validateEpochs(s.Epochs, s.Epoch, s.NumSplits, "mix state"); err != nil {
		return err
	}
	if err := CheckIncarnation(s.Incarnation); err != nil {
		return err
	}
	for k, t := range s.Taken {
		if len(t) != s.NumSplits {
			return fmt.Errorf("checkpoint: mix state source %d has %d cursors for num_splits %d", k, len(t), s.NumSplits)
		}
		for i, c := range t {
			if c < 0 {
				return fmt.Errorf("checkpoint: mix state source %d cursor %d is negative", k, i)
			}
		}
	}
	return nil
}

// Clone returns a deep copy.
func (s MixState) Clone() MixState {
	s.Cursors = slices.Clone(s.Cursors)
	s.Epochs = slices.Clone(s.Epochs)
	s.Taken = slices.Clone(s.Taken)
	for k := range s.Taken {
		s.Taken[k] = slices.Clone(s.Taken[k])
	}
	return s
}

// MergeMix merges the states all ranks of a mix saved at one step into one
// (Rank -1) that any world size dividing NumSplits resumes, as Merge does
// for datasets' states: every rank present exactly once, all of one
// incarnation, and ranks in different epochs (at an epoch's boundary)
// merge, each split keeping its rank's epoch.
func MergeMix(states ...MixState) (MixState, error) {
	if len(states) == 0 {
		return MixState{}, fmt.Errorf("checkpoint: merge of no mix states")
	}
	first := states[0]
	if err := first.Validate(); err != nil {
		return MixState{}, err
	}
	if first.Rank < 0 {
		if len(states) != 1 {
			return MixState{}, fmt.Errorf("checkpoint: merge of a merged mix state with others")
		}
		return first.Clone(), nil
	}
	world := first.WorldSize
	if len(states) != world {
		return MixState{}, fmt.Errorf("%w: mix merge needs all %d ranks, got %d states", ErrMismatch, world, len(states))
	}
	out := first.Clone()
	out.Rank, out.Next = -1, 0
	seen := make([]bool, world)
	epochs := make([]int64, first.NumSplits)
	for _, st := range states {
		out.Epoch = min(out.Epoch, st.Epoch)
	}
	for _, st := range states {
		if err := st.Validate(); err != nil {
			return MixState{}, err
		}
		switch {
		case st.Fingerprint != first.Fingerprint:
			return MixState{}, fmt.Errorf("%w: field fingerprint: rank %d's mix state is of another mix than rank %d's", ErrMismatch, st.Rank, first.Rank)
		case st.Incarnation != first.Incarnation:
			return MixState{}, fmt.Errorf("%w: field incarnation: rank %d was saved by incarnation %q, rank %d by %q", ErrMismatch, st.Rank, st.Incarnation, first.Rank, first.Incarnation)
		case st.Rank < 0 || st.WorldSize != world || st.NumSplits != first.NumSplits:
			return MixState{}, fmt.Errorf("%w: field world_size: rank %d has world_size %d and %d splits, expected %d and %d", ErrMismatch, st.Rank, st.WorldSize, st.NumSplits, world, first.NumSplits)
		case len(st.Taken) != len(first.Taken):
			return MixState{}, fmt.Errorf("%w: field taken: rank %d has %d sources, rank %d %d", ErrMismatch, st.Rank, len(st.Taken), first.Rank, len(first.Taken))
		case seen[st.Rank]:
			return MixState{}, fmt.Errorf("%w: field rank: rank %d appears twice", ErrMismatch, st.Rank)
		}
		seen[st.Rank] = true
		for s := st.Rank; s < st.NumSplits; s += world {
			out.Cursors[s] = st.Cursors[s]
			epochs[s] = st.SplitEpoch(s)
			for k := range out.Taken {
				out.Taken[k][s] = st.Taken[k][s]
			}
		}
	}
	out.SetEpochs(epochs)
	return out, nil
}

// A mix state is framed as a dataset's state is (see Encode), with its own
// magic, so neither is ever read as the other: "SLMX", format version
// (uint16), payload length (uint32), the state as JSON, CRC-32C of all
// before it. The payload's "version" is the frame's: 1 without epochs and
// incarnation, 2 with either.
const mixMagic = "SLMX"

// EncodeMix returns st framed and checksummed. It refuses a state that fails
// Validate.
func EncodeMix(st MixState) ([]byte, error) {
	if err := st.Validate(); err != nil {
		return nil, err
	}
	version := 1
	if st.hasEpochs() || st.Incarnation != "" {
		version = 2
	}
	st.Version = version
	if !st.hasEpochs() {
		st.Epochs = nil
	}
	payload, err := json.Marshal(st)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: encode mix state: %w", err)
	}
	if uint64(len(payload)) > math.MaxUint32 {
		return nil, fmt.Errorf("checkpoint: encode mix state: payload of %d bytes is too large", len(payload))
	}
	b := make([]byte, 0, frameHeader+len(payload)+frameCRC)
	b = append(b, mixMagic...)
	b = binary.BigEndian.AppendUint16(b, uint16(version))
	b = binary.BigEndian.AppendUint32(b, uint32(len(payload)))
	b = append(b, payload...)
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli)), nil
}

// DecodeMix reads a state written by EncodeMix and validates it. Malformed
// input yields an error wrapping ErrCorrupt (one that names a dataset's
// state where that is what the bytes hold); a newer format version a
// *VersionError.
func DecodeMix(b []byte) (MixState, error) {
	st, err := decodeMix(b)
	if err != nil {
		return MixState{}, fmt.Errorf("checkpoint: %w", err)
	}
	return st, nil
}

func decodeMix(b []byte) (MixState, error) {
	if len(b) < frameHeader+frameCRC {
		return MixState{}, corrupt("mix state of %d bytes is shorter than its frame", len(b))
	}
	switch m := string(b[:4]); m {
	case mixMagic:
	case magic:
		return MixState{}, corrupt("the bytes hold a dataset's state, not a mix's")
	default:
		return MixState{}, corrupt("bad magic %q, not a mix state", m)
	}
	n := int64(binary.BigEndian.Uint32(b[6:]))
	if n != int64(len(b)-frameHeader-frameCRC) {
		return MixState{}, corrupt("mix state payload length %d does not match its %d bytes", n, len(b))
	}
	body := b[:len(b)-frameCRC]
	if got, want := crc32.Checksum(body, castagnoli), binary.BigEndian.Uint32(b[len(body):]); got != want {
		return MixState{}, corrupt("mix state checksum %08x, stored %08x", got, want)
	}
	v := int(binary.BigEndian.Uint16(b[4:]))
	switch {
	case v > MixStateVersion:
		return MixState{}, &VersionError{Version: v, Max: MixStateVersion}
	case v < 1:
		return MixState{}, corrupt("mix state format version %d is not one this build wrote", v)
	}
	var st MixState
	dec := json.NewDecoder(bytes.NewReader(body[frameHeader:]))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&st); err != nil {
		return MixState{}, corruptWrap(err, "mix state payload")
	}
	if dec.More() {
		return MixState{}, corrupt("mix state payload has bytes after its state")
	}
	switch {
	case st.Version != v:
		return MixState{}, corrupt("mix state payload says version %d in a version %d frame", st.Version, v)
	case v < 2 && (st.Epochs != nil || st.Incarnation != ""):
		return MixState{}, corrupt("a version %d mix state holds epochs or an incarnation, which came in version 2", v)
	}
	st.Version = MixStateVersion
	if !st.hasEpochs() {
		st.Epochs = nil
	}
	if err := st.Validate(); err != nil {
		return MixState{}, corruptWrap(err, "mix state")
	}
	return st, nil
}
