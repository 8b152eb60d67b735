package split

// Window is a run of consecutive pieces of a split that are read together
// and shuffled among themselves.
type Window struct {
	// First and End index the split's pieces, [First, End).
	First, End int
	// Rows is the window's row count, or -1 if a piece's is unknown.
	Rows int64
}

// Windows packs a split's pieces, given their row counts in split order, into
// windows of at most size rows. Pieces are never cut here (NewEpoch has cut
// those of paged chunks to size; cutting another would fetch its row group
// twice), so a piece larger than size is a window of its own; a piece of
// unknown count (-1) is always a window of its own.
func Windows(pieceRows []int64, size int) []Window {
	var out []Window
	cur := Window{}
	for i, n := range pieceRows {
		if cur.End > cur.First && (n < 0 || cur.Rows < 0 || cur.Rows+n > int64(size)) {
			out = append(out, cur)
			cur = Window{First: i}
		}
		if cur.End == cur.First {
			cur.First = i
		}
		cur.End = i + 1
		if n < 0 || cur.Rows < 0 {
			cur.Rows = -1
		} else {
			cur.Rows += n
		}
	}
	if cur.End > cur.First {
		out = append(out, cur)
	}
	return out
}
