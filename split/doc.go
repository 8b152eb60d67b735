// Package split deals an epoch's order into NumSplits balanced splits and
// walks them: which rows each split holds, how its rows are packed into
// shuffle windows, which splits a rank owns, the batches a rank cuts from
// them, cursors (how far a consumer got) and their merges across world
// sizes, and the mapping of a position back to its row for random access.
//
// Five nouns name the pieces of data, from the file up:
//
//   - a unit is what a format reads on its own: a Parquet row group, an ORC
//     stripe, a block of a text file (Unit, in a File);
//   - a chunk is a run of consecutive units of one file, or a run of rows
//     of one paged unit too large for a window, the thing the chunk order
//     shuffles (Chunk; Chunks makes them);
//   - a split is one of NumSplits disjoint lists of chunk pieces, a piece
//     being the rows of one chunk that fall in one split (Split, Piece;
//     Balance deals them);
//   - a window is a run of a split's pieces read together and shuffled
//     among themselves, a piece of a paged chunk being cut to the window
//     first (Window, WindowRef);
//   - a batch is what a consumer receives, made of parts, each a range of
//     one window's emission order (Batch, Part; Schedule cuts them).
//
// The order itself (which chunk comes first, in which order a window emits
// its rows, the weighted walk of a mix) is package permutation's; this
// package only deals and walks it. Epoch puts the two together: the chunk
// order, the splits and the windows of one epoch.
//
// Everything here is a pure function of its inputs: no I/O, no goroutines,
// no Arrow, no clocks; it imports only the standard library and
// permutation. The same inputs give the same splits on any machine, which
// is what makes a job's order elastic and its states resumable, and lets
// the invariants be property-tested by the thousand
// (go test ./split -run Property).
package split
