// Package permutation is the order: as pure functions of the seed, the
// epoch and the order options, the order in which an epoch takes its chunks
// (ChunkOrder), the clumped order in which a shuffle window emits its rows
// (RowOrder), and the weighted walk that interleaves the sources of a mix
// (Mix, MixWalk).
//
// The generator (PCG seeded through splitmix64) and the shuffling
// arithmetic (Lemire's bounded draw, Fisher-Yates) are written out here
// rather than taken from math/rand's helpers, so that an order never
// changes with the Go version: orders are part of every saved state, and
// TestOrdersArePinned holds them to fixed digests.
//
// No I/O, no goroutines, no Arrow, no clocks; only the standard library.
// Package split deals the order into splits, windows and batches.
package permutation
