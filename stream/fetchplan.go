package stream

import (
	"cmp"
	"slices"

	"github.com/sluicedata/sluice/formats"
	"github.com/sluicedata/sluice/split"
)

// A shuffled window takes its row groups from all over the dataset, so a
// window alone rarely holds two neighbours; but the windows fetched at the
// same time (FetchConcurrency of them) often do. The fetch planner walks
// the windows in read order and, for each, takes into its fetch the pieces
// of the next windows that are adjacent rows of one file to its own: one
// request where there would be several, and every byte still fetched once.
// A later window whose pieces an earlier one fetched waits for that fetch.
//
// Pieces of later windows join a fetch only while it stays under
// joinBytes: joining saves the cost of a request, which matters for small
// pieces, while a large fetch would make its window wait for bytes it does
// not need yet (an unshuffled epoch would otherwise fetch FetchConcurrency
// windows before decoding the first).
const joinBytes = 8 << 20

// fetchGroup is one fetch of adjacent pieces, of one window or of several:
// the earliest of them in read order makes it, the others wait for done.
type fetchGroup struct {
	frag       int
	start, end int64
	done       chan struct{} // closed once whole or err is set
	whole      *formats.Fetched
	err        error
}

// share is the part of the group's bytes that piece p accounts for (by
// rows), so that each window's fetched bytes count what it decodes.
func (g *fetchGroup) share(p split.Piece) int64 {
	if g.end <= g.start || p.End < p.Start { // unknown rows: the piece is the group
		return g.whole.Bytes
	}
	return g.whole.Bytes * (p.End - p.Start) / (g.end - g.start)
}

// fetchTask is what the fetch stage does for one window: make the groups it
// owns, then find each of its pieces in its group.
type fetchTask struct {
	ref    windowRef
	owned  []*fetchGroup
	pieces []*fetchGroup // parallel to the window's pieces
}

// at places a piece: the window and its index among the window's pieces.
type at struct {
	w windowRef
	i int
}

// fetchPlanner turns the read order into fetch tasks. It is not safe for
// concurrent use: the stage's feeder alone calls it, in read order.
type fetchPlanner struct {
	ep     *epochPlan
	chunks []split.Chunk
	ahead  int // windows whose pieces one fetch may take, its own included
	// claimed holds, for windows not yet planned, the groups earlier
	// windows made of some of their pieces.
	claimed map[windowRef][]*fetchGroup
}

func newFetchPlanner(ep *epochPlan, chunks []split.Chunk, ahead int) *fetchPlanner {
	return &fetchPlanner{ep: ep, chunks: chunks, ahead: max(ahead, 1), claimed: map[windowRef][]*fetchGroup{}}
}

// bytes estimates a piece's stored bytes from its chunk's, by rows.
func (fp *fetchPlanner) bytes(p split.Piece) int64 {
	c := fp.chunks[p.Chunk]
	if c.Rows() <= 0 || p.Rows() < 0 {
		return c.Bytes
	}
	return c.Bytes * p.Rows() / c.Rows()
}

func (fp *fetchPlanner) pieces(r windowRef) []split.Piece {
	wd := fp.ep.windows[r.split][r.window]
	return fp.ep.splits[r.split].Pieces[wd.First:wd.End]
}

// plan makes the task of next[0], given the windows read after it
// (next[1:], of which the first ahead-1 are considered).
func (fp *fetchPlanner) plan(next []windowRef) *fetchTask {
	r := next[0]
	t := &fetchTask{ref: r, pieces: fp.claimed[r]}
	delete(fp.claimed, r)
	if t.pieces == nil {
		t.pieces = make([]*fetchGroup, len(fp.pieces(r)))
	}
	// The unclaimed pieces of this window and the next ones.
	var pool []split.Piece
	var where []at
	for _, w := range next[:min(fp.ahead, len(next))] {
		taken := fp.claimed[w]
		if w == r {
			taken = t.pieces
		}
		for i, p := range fp.pieces(w) {
			if taken == nil || taken[i] == nil {
				pool = append(pool, p)
				where = append(where, at{w, i})
			}
		}
	}
	for _, run := range adjacentRuns(pool) {
		// Walk the run in row order: the window's own pieces always join
		// the current group, a later window's only under joinBytes. A group
		// without a piece of this window is left to its windows.
		var group []int
		var size int64
		flush := func() {
			if slices.ContainsFunc(group, func(k int) bool { return where[k].w == r }) {
				t.owned = append(t.owned, fp.claim(t, group, pool, where))
			}
			group, size = nil, 0
		}
		for _, k := range run {
			b := fp.bytes(pool[k])
			if where[k].w != r && size+b > joinBytes {
				flush()
				continue
			}
			group = append(group, k)
			size += b
		}
		flush()
	}
	return t
}

// claim makes one group of the contiguous pool pieces at ks and hands each
// piece to it: this window's in t, later windows' in claimed.
func (fp *fetchPlanner) claim(t *fetchTask, ks []int, pool []split.Piece, where []at) *fetchGroup {
	first, last := pool[ks[0]], pool[ks[len(ks)-1]]
	g := &fetchGroup{frag: first.Fragment, start: first.Start, end: last.End, done: make(chan struct{})}
	for _, k := range ks {
		w, i := where[k].w, where[k].i
		if w == t.ref {
			t.pieces[i] = g
			continue
		}
		if fp.claimed[w] == nil {
			fp.claimed[w] = make([]*fetchGroup, len(fp.pieces(w)))
		}
		fp.claimed[w][i] = g
	}
	return g
}

// adjacentRuns groups pieces (by index) into runs of rows that follow one
// another in one file, each run in row order. A piece of unknown
// rows is a run of its own.
func adjacentRuns(pieces []split.Piece) [][]int {
	idx := make([]int, len(pieces))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int {
		pa, pb := pieces[a], pieces[b]
		return cmp.Or(cmp.Compare(pa.Fragment, pb.Fragment), cmp.Compare(pa.Start, pb.Start), cmp.Compare(a, b))
	})
	var runs [][]int
	for _, i := range idx {
		if n := len(runs); n > 0 {
			prev := pieces[runs[n-1][len(runs[n-1])-1]]
			if p := pieces[i]; p.Start >= 0 && p.Fragment == prev.Fragment && p.Start == prev.End {
				runs[n-1] = append(runs[n-1], i)
				continue
			}
		}
		runs = append(runs, []int{i})
	}
	return runs
}
