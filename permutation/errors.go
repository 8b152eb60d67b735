package permutation

import "errors"

// The errors are shared with package split, which exports them under the
// same names: a mix and a dataset fail a lookup the same way.

// ErrUnknownRows is returned when DropRemainder is asked of chunks whose row
// counts are not known before reading.
var ErrUnknownRows = errors.New("permutation: row counts are unknown")

// ErrPosition is wrapped when a position lies outside the order it is
// looked up in.
var ErrPosition = errors.New("permutation: position out of range")
