// Package sample chooses the part of a test's loop that -short runs.
//
// CI runs the suite twice (docs/testing.md, "How CI spends its time"):
// under the race detector with -short, where a loop's cases are there to
// make goroutines meet and a spread of them does that, and without the
// detector at full count, where every case is checked. The race detector
// makes a single-goroutine loop about ten times slower and finds nothing
// more in its hundredth case than in its third.
package sample

import "testing"

// Count is full, or short under -short.
func Count(full, short int) int {
	if testing.Short() {
		return short
	}
	return full
}

// Spread is all, or under -short n of its elements spread evenly from the
// first to the last, so that a table's corners stay in the sample.
func Spread[T any](all []T, n int) []T {
	if !testing.Short() || len(all) <= n {
		return all
	}
	if n <= 1 {
		return all[:max(n, 0)]
	}
	out := make([]T, 0, n)
	for i := range n {
		out = append(out, all[i*(len(all)-1)/(n-1)])
	}
	return out
}
