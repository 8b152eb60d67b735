package engine

import (
	"cmp"
	"slices"

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
// JoinBytes: joining saves the cost of a request, which matters for small
// pieces, while a large fetch would make its window wait for bytes it does
// not need yet (an unshuffled epoch would otherwise fetch FetchConcurrency
// windows before decoding the first).
//
// A row group taken a window at a time (split.Chunk.Paged) is the
// exception: where a window's fetch stops inside a row group, the next
// fetch starts in the same pages and fetches them again, about a page per
// column. Pieces that go on in the row group the group's last piece ends
// in therefore join up to UnitJoinBytes (Fetches.UnitJoinBytes), taken
// from the next windows of the same split too (goOn), which makes that
// cost a small part of what a fetch holds and still bounds it: a split
// read through a large row group holds about one such fetch being decoded
// and one fetched ahead, not the row group.
const JoinBytes = 8 << 20

// Group is one fetch of adjacent pieces, of one window or of several: the
// earliest of them in read order makes it, the others wait for it.
type Group struct {
	// ID numbers the groups of one planner in the order it makes them.
	ID int
	// Range is the rows (or units, where counts are unknown) of one file
	// the group fetches: its pieces joined.
	Range split.Piece
	// Bytes estimates the stored bytes of the range.
	Bytes int64
	// Pieces is the number of pieces taken from the group: once all have
	// been, its bytes can go.
	Pieces int
}

// Share is the part of the group's fetched bytes that piece p accounts for
// (by rows), so that each window's fetched bytes count what it decodes.
func (g *Group) Share(p split.Piece, fetched int64) int64 {
	r := g.Range
	if r.Start < 0 || p.Start < 0 || r.End <= r.Start {
		if r.EndUnit > r.FirstUnit {
			return fetched * int64(p.EndUnit-p.FirstUnit) / int64(r.EndUnit-r.FirstUnit)
		}
		return fetched
	}
	return fetched * (p.End - p.Start) / (r.End - r.Start)
}

// Task is what the fetch stage does for one window: make the groups it
// owns, then take each of its pieces from its group.
type Task struct {
	Ref   split.WindowRef
	Owned []*Group
	// Pieces holds each of the window's pieces' group, in piece order.
	Pieces []*Group
}

// at places a piece: the window and its index among the window's pieces.
type at struct {
	w split.WindowRef
	i int
}

// Fetches turns the read order into fetch tasks: a pure function of the
// epoch, the chunks and the read order, so the requests a job makes do not
// depend on timing. It is not safe for concurrent use.
type Fetches struct {
	ep     *split.Epoch
	chunks []split.Chunk
	// Ahead is the number of windows whose pieces one fetch may take, its
	// own included.
	Ahead int
	// UnitJoinBytes bounds a fetch that later windows' pieces join where
	// they go on in the unit its last piece ends in; JoinBytes where it is
	// less. Such pieces are also taken from the next windows of the
	// fetch's own split, beyond Ahead: a rank reading several splits
	// round-robin reads them only after a window of each other split.
	UnitJoinBytes int64
	// Skip, if set, names windows that are not fetched (kept decoded from
	// an earlier iteration): no fetch takes their pieces.
	Skip func(split.WindowRef) bool
	// Ramp is the number of windows, the first planned, whose fetches take
	// no later window's pieces (but those that go on in a unit, as above):
	// the first round of decoders waits for its own bytes only. Joined, the
	// first window of a 16-core read waited 4.3 ms for an 8 MiB fetch
	// while its decoder, and the fifteen after it, had nothing to do.
	Ramp    int
	planned int
	// claimed holds, for windows not yet planned, the groups earlier
	// windows made of some of their pieces.
	claimed map[split.WindowRef][]*Group
	nextID  int
}

// NewFetches plans the fetches of ep's windows, each joining the adjacent
// pieces of up to ahead-1 windows read after it.
func NewFetches(ep *split.Epoch, chunks []split.Chunk, ahead int) *Fetches {
	return &Fetches{ep: ep, chunks: chunks, Ahead: max(ahead, 1), claimed: map[split.WindowRef][]*Group{}}
}

// bytes estimates a piece's stored bytes from its chunk's, by the rows it
// reads (with passes, those of other passes between its own too).
func (fp *Fetches) bytes(p split.Piece) int64 {
	c := fp.chunks[p.Chunk]
	if c.Rows() <= 0 || p.Span() < 0 {
		return c.Bytes
	}
	return c.Bytes * p.Span() / c.Rows()
}

func (fp *Fetches) pieces(r split.WindowRef) []split.Piece { return fp.ep.Pieces(r) }

// Claimed reports whether an earlier window's group holds some of r's
// pieces: r's task must then be made for those bytes to be used.
func (fp *Fetches) Claimed(r split.WindowRef) bool { return fp.claimed[r] != nil }

// Plan makes the task of next[0], given the windows read after it
// (next[1:], of which the first Ahead-1 are considered).
func (fp *Fetches) Plan(next []split.WindowRef) *Task {
	r := next[0]
	t := &Task{Ref: r, Pieces: fp.claimed[r]}
	delete(fp.claimed, r)
	if t.Pieces == nil {
		t.Pieces = make([]*Group, len(fp.pieces(r)))
	}
	// The unclaimed pieces of this window and the next ones.
	var pool []split.Piece
	var where []at
	for _, w := range next[:min(fp.Ahead, len(next))] {
		taken := fp.claimed[w]
		if w == r {
			taken = t.Pieces
		}
		for i, p := range fp.pieces(w) {
			if taken == nil || taken[i] == nil {
				pool = append(pool, p)
				where = append(where, at{w, i})
			}
		}
	}
	pool, where = fp.goOn(r, pool, where)
	join := int64(JoinBytes)
	if fp.planned < fp.Ramp {
		join = 0
	}
	fp.planned++
	for _, run := range adjacentRuns(pool) {
		// Walk the run in row order: the window's own pieces always join
		// the current group, a later window's only under JoinBytes. A group
		// without a piece of this window is left to its windows.
		var group []int
		var size int64
		flush := func() {
			if slices.ContainsFunc(group, func(k int) bool { return where[k].w == r }) {
				t.Owned = append(t.Owned, fp.claim(t, group, pool, where))
			}
			group, size = nil, 0
		}
		for _, k := range run {
			b := fp.bytes(pool[k])
			limit := join
			if len(group) > 0 && sameUnit(pool[group[len(group)-1]], pool[k]) {
				limit = max(limit, fp.UnitJoinBytes)
			}
			if where[k].w != r && size+b > limit {
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

// goOn adds to the pool the pieces of r's split's next windows that go on
// in the unit r's last piece ends in, up to UnitJoinBytes: the rows a
// fetch of r would otherwise stop inside a unit before, leaving the pages
// there to be fetched again.
func (fp *Fetches) goOn(r split.WindowRef, pool []split.Piece, where []at) ([]split.Piece, []at) {
	own := fp.pieces(r)
	if fp.UnitJoinBytes <= JoinBytes || len(own) == 0 {
		return pool, where
	}
	pooled := map[at]bool{}
	for _, a := range where {
		pooled[a] = true
	}
	last := own[len(own)-1]
	budget := fp.UnitJoinBytes - fp.bytes(last)
	for w := r.Window + 1; w < len(fp.ep.Windows[r.Split]) && budget > 0; w++ {
		ref := split.WindowRef{Split: r.Split, Window: w}
		if fp.Skip != nil && fp.Skip(ref) {
			return pool, where
		}
		for i, p := range fp.pieces(ref) {
			if !p.Follows(last) || !sameUnit(last, p) || budget <= 0 {
				return pool, where
			}
			if c := fp.claimed[ref]; c != nil && c[i] != nil {
				return pool, where // an earlier fetch has it
			}
			if a := (at{ref, i}); !pooled[a] {
				pool = append(pool, p)
				where = append(where, a)
			}
			last = p
			budget -= fp.bytes(p)
		}
	}
	return pool, where
}

// claim makes one group of the contiguous pool pieces at ks and hands each
// piece to it: this window's in t, later windows' in claimed.
func (fp *Fetches) claim(t *Task, ks []int, pool []split.Piece, where []at) *Group {
	first, last := pool[ks[0]], pool[ks[len(ks)-1]]
	rng := first
	rng.End, rng.EndUnit = last.End, last.EndUnit
	g := &Group{ID: fp.nextID, Range: rng, Pieces: len(ks)}
	fp.nextID++
	for _, k := range ks {
		g.Bytes += fp.bytes(pool[k])
		w, i := where[k].w, where[k].i
		if w == t.Ref {
			t.Pieces[i] = g
			continue
		}
		if fp.claimed[w] == nil {
			fp.claimed[w] = make([]*Group, len(fp.pieces(w)))
		}
		fp.claimed[w][i] = g
	}
	return g
}

// adjacentRuns groups pieces (by index) into runs of rows that follow one
// another in one file (units, where counts are unknown), each run in row
// order.
func adjacentRuns(pieces []split.Piece) [][]int {
	idx := make([]int, len(pieces))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int {
		pa, pb := pieces[a], pieces[b]
		return cmp.Or(cmp.Compare(pa.Fragment, pb.Fragment), cmp.Compare(pa.Start, pb.Start), cmp.Compare(pa.FirstUnit, pb.FirstUnit), cmp.Compare(a, b))
	})
	var runs [][]int
	for _, i := range idx {
		if n := len(runs); n > 0 {
			prev := pieces[runs[n-1][len(runs[n-1])-1]]
			if pieces[i].Follows(prev) {
				runs[n-1] = append(runs[n-1], i)
				continue
			}
		}
		runs = append(runs, []int{i})
	}
	return runs
}

// sameUnit reports whether p goes on in the one unit prev ends in: a
// fetch that stopped between them would fetch the pages at p's start
// twice.
func sameUnit(prev, p split.Piece) bool {
	return prev.Start >= 0 && p.Start >= 0 && p.FirstUnit == prev.EndUnit-1 && p.EndUnit == p.FirstUnit+1
}
