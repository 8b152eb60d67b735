package main

import "testing"

// The example checks that every row of the epoch came once across the crash.
func TestCheckpointing(t *testing.T) {
	if err := run(); err != nil {
		t.Fatal(err)
	}
}
