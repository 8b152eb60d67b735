package main

import (
	"testing"

	"github.com/sluicedata/sluice/examples/exampledata"
)

// The quickstart checks its own resume and fails if it is not exact.
func TestQuickstart(t *testing.T) {
	dataset = exampledata.Spec{Files: 4, RowsPerFile: 20_000, RowGroupRows: 2048, Seed: 1}
	if err := run(); err != nil {
		t.Fatal(err)
	}
}
