package checkpoint

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
)

// TestSkippable pins down which failures Latest passes over.
func TestSkippable(t *testing.T) {
	for err, want := range map[error]bool{
		fmt.Errorf("x: %w", corrupt("y")):                 true,
		fmt.Errorf("x: %w", trimPrefix(ErrIncomplete)):    true,
		fmt.Errorf("x: %w", ErrMismatch):                  true,
		&VersionError{Version: 2, Max: 1}:                 false,
		errors.New("connection reset"):                    false,
		fmt.Errorf("x: %w", context.DeadlineExceeded):     false,
		fmt.Errorf("x: %w", trimPrefix(ErrNotFound)):      true,
		fmt.Errorf("x: %w", bytes.ErrTooLarge):            false,
		fmt.Errorf("%w", &corruptError{what: "marker"}):   true,
		fmt.Errorf("%w", &redactedError{err: ErrCorrupt}): true,
	} {
		if got := skippable(err); got != want {
			t.Errorf("skippable(%v) = %t", err, got)
		}
	}
}
