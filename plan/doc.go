// Package plan decides which row comes when: files with their units and row
// counts in; chunks, chunk order, balanced splits, shuffle windows, clumped
// row order, rank schedules, fetch groups, cursor checks and cursor merges
// out.
//
// Everything here is a pure function of its inputs: no I/O, no goroutines,
// no Arrow, no clocks. The same inputs give the same plan on any machine and
// Go version (the generator, PCG, and the shuffling arithmetic are fixed
// here), which is what makes a job's order elastic and its states resumable,
// and lets the invariants be property-tested by the thousand.
package plan
