//go:build cgo

package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"

	"github.com/sluicedata/sluice/checkpoint"
	"github.com/sluicedata/sluice/filter"
	"github.com/sluicedata/sluice/formats"
	"github.com/sluicedata/sluice/formats/iceberg"
	"github.com/sluicedata/sluice/formats/iceberg/catalogs"
	"github.com/sluicedata/sluice/formats/text"
	"github.com/sluicedata/sluice/permutation"
	"github.com/sluicedata/sluice/stream"
)

// kindError carries a kind decided where the error is made (usage, closed,
// internal) rather than by its sentinels.
type kindError struct {
	kind string
	err  error
}

func (e *kindError) Error() string { return e.err.Error() }
func (e *kindError) Unwrap() error { return e.err }

// errClosed is returned for a handle that was closed or never opened.
var errClosed = errors.New("sluice: the dataset is closed")

// kinds maps sentinels to the kind the Python package turns into its
// exception class, first match wins: a state of another dataset is a
// mismatch even where a storage error is wrapped beside it.
var kinds = []struct {
	err  error
	kind string
}{
	{checkpoint.ErrMismatch, "mismatch"},
	{stream.ErrPlanMismatch, "mismatch"},
	{checkpoint.ErrUnsupportedVersion, "version"},
	{formats.ErrChanged, "changed"}, // before corrupt: the bytes of another version may not parse
	{checkpoint.ErrCorrupt, "corrupt"},
	{formats.ErrCorrupt, "corrupt"},
	{text.ErrBadRow, "corrupt"},
	{formats.ErrSchema, "schema"},
	{filter.ErrType, "schema"},
	{filter.ErrSyntax, "usage"},
	{catalogs.ErrSpec, "usage"},
	{permutation.ErrUnknownRows, "usage"}, // split.ErrUnknownRows is the same error
	{permutation.ErrPosition, "position"}, // split.ErrPosition is the same error
	{stream.ErrBusy, "busy"},
	{iceberg.ErrSnapshot, "not_found"},
	{stream.ErrEmpty, "empty"},
	{formats.ErrEmpty, "not_found"},
	{formats.ErrNotFound, "not_found"},
	{checkpoint.ErrNotFound, "not_found"},
	{fs.ErrNotExist, "not_found"},
	{errClosed, "closed"},
	{context.Canceled, "cancelled"},
}

// kindOf is err's kind: one the error was made with, else its first
// sentinel's, else "error".
func kindOf(err error) string {
	var ke *kindError
	if errors.As(err, &ke) {
		return ke.kind
	}
	for _, k := range kinds {
		if errors.Is(err, k.err) {
			return k.kind
		}
	}
	return "error"
}

// panicErr turns a recovered panic into an error of kind internal, so
// that no panic crosses into the caller's process.
func panicErr(r any) error {
	return &kindError{kind: "internal", err: fmt.Errorf("sluice: internal error (a bug; please report it): panic: %v", r)}
}
