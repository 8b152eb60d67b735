package checkpoint

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors wrapped by this package's errors; test for them with
// errors.Is. ErrMismatch, in state.go, is the one for states taken from
// another dataset, order or world size.
var (
	// ErrNotFound is wrapped when a run, step or rank has no stored state, and
	// when Latest finds no complete step.
	ErrNotFound = errors.New("checkpoint: not found")
	// ErrCorrupt is wrapped when stored or given bytes are not a well-formed
	// state: bad magic, checksum, truncation, malformed msgpack, or contents
	// that fail State.Validate.
	ErrCorrupt = errors.New("checkpoint: corrupt state")
	// ErrIncomplete is wrapped when a step lacks the state of some rank (or,
	// in a bucket store, its completion marker), so it cannot be resumed from.
	ErrIncomplete = errors.New("checkpoint: step incomplete")
	// ErrUnsupportedVersion is wrapped (by *VersionError) when a state was
	// written in a format version newer than this build reads.
	ErrUnsupportedVersion = errors.New("checkpoint: unsupported state format version")
	// ErrClosed is wrapped when a store is used after Close.
	ErrClosed = errors.New("checkpoint: store closed")
)

// VersionError reports a state written in a format version this build cannot
// read. It matches ErrUnsupportedVersion under errors.Is.
type VersionError struct {
	// Version is the format version found in the envelope.
	Version int
	// Max is the newest format version this build reads (StateVersion).
	Max int
}

// Error says which version was found and which this build reads.
func (e *VersionError) Error() string {
	return fmt.Sprintf("state format version %d needs a newer sluice (this build reads up to %d)", e.Version, e.Max)
}

// Is makes errors.Is(err, ErrUnsupportedVersion) hold.
func (e *VersionError) Is(target error) bool { return target == ErrUnsupportedVersion }

// corruptError carries the reason bytes were refused. Its text has no
// "checkpoint:" prefix so that a store can put the run, step and rank in
// front without repeating the package name; Decode adds the prefix.
type corruptError struct {
	what string
	err  error
}

func corrupt(format string, args ...any) error {
	return &corruptError{what: fmt.Sprintf(format, args...)}
}

func corruptWrap(err error, format string, args ...any) error {
	return &corruptError{what: fmt.Sprintf(format, args...), err: err}
}

func (e *corruptError) Error() string {
	s := "corrupt state: " + e.what
	if e.err != nil {
		s += ": " + strings.TrimPrefix(e.err.Error(), "checkpoint: ")
	}
	return s
}

func (e *corruptError) Unwrap() error { return e.err }

// Is makes errors.Is(err, ErrCorrupt) hold.
func (e *corruptError) Is(target error) bool { return target == ErrCorrupt }
