package split

// Passes (permutation.Order.Passes) read every chunk several times an
// epoch, each pass keeping a disjoint part of its rows, so that a window of
// the same rows is made of that many times more places in the dataset. A
// chunk's rows are counted from its first row in clumps of ClumpSize rows,
// and clump c goes to pass c mod Passes: every pass takes rows from all
// along the chunk (on data sorted by a label, each pass of a row group holds
// its whole range of labels, where a contiguous slice would hold a part of
// it), clumps stay whole, and the rows of every pass, and of every run of
// rows of a pass, are counted exactly by arithmetic, so that splits balance
// by rows at plan time as they do without passes.
//
// The assignment is not seeded: which pass of a chunk holds which clumps
// is a label, and the seeded chunk order already puts each (chunk, pass)
// place anywhere in the epoch.

// Pass selects the rows of a chunk that one pass over it keeps. The zero
// Pass keeps every row.
type Pass struct {
	// Index is the pass, in [0, Of).
	Index int
	// Of is the number of passes over the chunk; 0 or 1 keeps every row.
	Of int
	// Clump is the rows of a clump, at least 1 where Of > 1.
	Clump int64
	// Base is the file row clumps are counted from: the chunk's first row.
	Base int64
}

// Every reports whether the pass keeps every row.
func (p Pass) Every() bool { return p.Of <= 1 }

// Keeps reports whether file row r is one of the pass's.
func (p Pass) Keeps(r int64) bool {
	if p.Every() {
		return true
	}
	return ((r-p.Base)/p.Clump)%int64(p.Of) == int64(p.Index)
}

// before is the pass's rows among file rows [Base, r).
func (p Pass) before(r int64) int64 {
	x := r - p.Base
	if x <= 0 {
		return 0
	}
	period := p.Clump * int64(p.Of)
	n := x / period * p.Clump
	lo := int64(p.Index) * p.Clump // where the pass's clump lies in a period
	return n + min(max(x%period-lo, 0), p.Clump)
}

// Count is the pass's rows among file rows [start, end), start at or after
// Base.
func (p Pass) Count(start, end int64) int64 {
	if p.Every() {
		return end - start
	}
	return p.before(end) - p.before(start)
}

// After is the file row just past the pass's n-th row from start (the
// least end with Count(start, end) == n), start itself for n = 0.
func (p Pass) After(start, n int64) int64 {
	if p.Every() {
		return start + max(n, 0)
	}
	if n <= 0 {
		return start
	}
	t := p.before(start) + n - 1 // the wanted row's index among the pass's rows
	q, off := t/p.Clump, t%p.Clump
	return p.Base + (q*int64(p.Of)+int64(p.Index))*p.Clump + off + 1
}

// place is one pass over one chunk: what the chunk order moves when an
// epoch reads its chunks in several passes.
type place struct {
	chunk int
	pass  Pass
}

// rows is the rows of the place.
func (pl place) rows(chunks []Chunk) int64 {
	c := chunks[pl.chunk]
	if c.Rows() < 0 {
		return -1
	}
	return pl.pass.Count(c.Start, c.End)
}

// places lists the places of an epoch in passes passes over chunks, in
// storage order: the passes of chunk 0, then those of chunk 1, and so on.
// One pass (passes <= 1) makes one place per chunk that keeps every row.
func places(chunks []Chunk, passes int, clump int64) []place {
	if passes <= 1 {
		out := make([]place, len(chunks))
		for i := range chunks {
			out[i] = place{chunk: i}
		}
		return out
	}
	clump = max(clump, 1)
	out := make([]place, 0, len(chunks)*passes)
	for i, c := range chunks {
		for k := range passes {
			out = append(out, place{chunk: i, pass: Pass{Index: k, Of: passes, Clump: clump, Base: c.Start}})
		}
	}
	return out
}
