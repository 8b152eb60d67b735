package permutation

import (
	"fmt"
	"math"
	"sort"
)

// Mixing interleaves several sources' rows by weight. It is worked out per
// split: mixed split s takes its rows from split s of every source (all
// sources have the same NumSplits), so what a mixed split emits never
// depends on the world size, and a rank takes its mixed splits round-robin
// as it takes a dataset's.
//
// The interleaving of one mixed split in one epoch is a merge by time: the
// j-th row of source k is due at time ceil((j*2^20 + F_k) / W_k), where W_k
// is the source's weight scaled so that the weights sum to about 2^20, and
// F_k in [0, 2^20) a phase drawn from (seed, epoch, split, k). Rows due at
// the same time go in source order. Time then runs at about one row per
// unit, source k takes a share W_k/sum(W) of every stretch of rows, off by
// less than one row per source, and how many rows of each source come
// before any position is a closed form found by binary search over time:
// seeking to a position costs the same at 1% and at 99% of an epoch.
//
// Each source's rows in the mix are the rows of its own passes one after
// another, pass p being the source's epoch p (Repeat: a new shuffle each
// pass, passes continue from one mixed epoch to the next) or, without
// Repeat, the mixed epoch's own number, once, and a source that runs out
// leaves the merge to the others.

// mixScale is what the weights are scaled to sum to.
const (
	mixShift = 20
	mixScale = 1 << mixShift
)

// streamMix draws the mix's phases, apart from the streams of order.go.
const streamMix = 3

// MixEpoch says how long a mixed epoch is when sources differ in size.
type MixEpoch int

const (
	// MixLargest: an epoch is as long as it takes every source to be seen
	// once at its weight: the source with the most rows per unit of weight
	// makes one pass, the others (with Repeat) more than one.
	MixLargest MixEpoch = iota
	// MixSmallest: an epoch ends when the first source, at its weight,
	// completes a pass; the others make less than one.
	MixSmallest
	// MixRows: an epoch is a fixed number of rows (MixOrder.Rows, dealt
	// over the splits as a dataset's rows are).
	MixRows
)

func (e MixEpoch) String() string {
	switch e {
	case MixLargest:
		return "largest"
	case MixSmallest:
		return "smallest"
	case MixRows:
		return "rows"
	}
	return fmt.Sprintf("MixEpoch(%d)", int(e))
}

// MixOrder holds what decides a mix's order, beside the sources' plans.
type MixOrder struct {
	// Weights are the sources' shares, positive; they need not sum to 1.
	Weights []float64
	Seed    uint64
	Epoch   MixEpoch
	// Rows is the rows of a MixRows epoch.
	Rows int64
	// Repeat lets a source run past its pass: its next pass follows, as
	// its next epoch. Without it each source gives at most one pass (its
	// epoch numbered as the mixed epoch) per mixed epoch.
	Repeat bool
	// NumSplits is the sources' (common) NumSplits.
	NumSplits int
}

// Mix is the mix of sources whose split s holds Rows[k][s] rows in every
// epoch (so their counts must be known).
type Mix struct {
	o      MixOrder
	rows   [][]int64 // [source][split]
	weight []int64
	// starts caches, per split, how many rows of each source the epochs
	// before hold: starts[s][e][k].
	starts map[int][][]int64
}

// NewMix checks the order and the sources' split sizes.
func NewMix(o MixOrder, rows [][]int64) (*Mix, error) {
	if len(o.Weights) == 0 || len(o.Weights) != len(rows) {
		return nil, fmt.Errorf("permutation: mix of %d sources with %d weights", len(rows), len(o.Weights))
	}
	if o.NumSplits < 1 {
		return nil, fmt.Errorf("permutation: mix NumSplits %d must be at least 1", o.NumSplits)
	}
	var sum float64
	for k, w := range o.Weights {
		if !(w > 0) || math.IsInf(w, 0) {
			return nil, fmt.Errorf("permutation: mix weight %v of source %d must be positive and finite", w, k)
		}
		sum += w
	}
	m := &Mix{o: o, rows: rows, weight: make([]int64, len(rows)), starts: map[int][][]int64{}}
	for k, w := range o.Weights {
		m.weight[k] = max(int64(math.Round(w/sum*mixScale)), 1)
		if len(rows[k]) != o.NumSplits {
			return nil, fmt.Errorf("permutation: mix source %d has %d splits, the mix %d: every source needs the same NumSplits", k, len(rows[k]), o.NumSplits)
		}
		var total int64
		for s, n := range rows[k] {
			if n < 0 {
				return nil, fmt.Errorf("%w: mix source %d split %d's count is not known before reading (a counting pass would make it so)", ErrUnknownRows, k, s)
			}
			total += n
		}
		if total == 0 {
			return nil, fmt.Errorf("permutation: mix source %d has no rows", k)
		}
	}
	switch o.Epoch {
	case MixLargest, MixSmallest:
	case MixRows:
		if o.Rows < 1 {
			return nil, fmt.Errorf("permutation: a mix epoch of %d rows: MixRows needs Rows of at least 1", o.Rows)
		}
	default:
		return nil, fmt.Errorf("permutation: unknown mix epoch %v", o.Epoch)
	}
	return m, nil
}

// Sources is the number of sources.
func (m *Mix) Sources() int { return len(m.weight) }

// timeline is one mixed split's merge in one epoch.
type timeline struct {
	w, phase []int64
	caps     []int64 // per source, the most rows it gives (-1: no bound)
}

func (m *Mix) timeline(epoch int64, split int) timeline {
	t := timeline{w: m.weight, phase: make([]int64, len(m.weight)), caps: make([]int64, len(m.weight))}
	o := Order{Seed: m.o.Seed}
	for k := range t.phase {
		r := newRand(o, epoch, streamMix, split, k)
		t.phase[k] = int64(below(r, mixScale))
		t.caps[k] = -1
		if !m.o.Repeat || m.rows[k][split] == 0 {
			t.caps[k] = m.rows[k][split]
		}
	}
	return t
}

// count is the rows of source k due at or before time T.
func (t timeline) count(k int, T int64) int64 {
	if T < 0 {
		return 0
	}
	x := T*t.w[k] - t.phase[k]
	if x < 0 {
		return 0
	}
	n := x/mixScale + 1
	if t.caps[k] >= 0 {
		n = min(n, t.caps[k])
	}
	return n
}

// due is the time the j-th row of source k is due.
func (t timeline) due(k int, j int64) int64 {
	return (j*mixScale + t.phase[k] + t.w[k] - 1) / t.w[k]
}

// total is the rows of all sources due at or before T.
func (t timeline) total(T int64) int64 {
	var n int64
	for k := range t.w {
		n += t.count(k, T)
	}
	return n
}

// at returns the source of position i and the rows of each source before
// it (into counts). ok is false when the sources (all capped) hold no row
// at i.
func (t timeline) at(i int64, counts []int64) (source int, ok bool) {
	// The time of position i: the first T whose total exceeds i.
	hi := int64(1)
	for t.total(hi) <= i {
		if hi > math.MaxInt64/4/mixScale {
			return 0, false
		}
		hi *= 2
	}
	T := int64(sort.Search(int(hi)+1, func(T int) bool { return t.total(int64(T)) > i }))
	// Among the rows due at T, in source order, the first i-total(T-1)
	// come before i.
	rank := i - t.total(T-1)
	src := -1
	for k := range t.w {
		c := t.count(k, T-1)
		counts[k] = c
		if t.count(k, T) == c || src >= 0 {
			continue
		}
		if rank == 0 {
			src = k
			continue
		}
		rank--
		counts[k] = c + 1
	}
	return src, src >= 0
}

// MixWalk walks a mixed split's positions in order, one row at a time,
// from a position found once by search. It is not safe for concurrent use.
type MixWalk struct {
	m      *Mix
	t      timeline
	epoch  int64
	split  int
	pos    int64
	end    int64
	counts []int64
	start  []int64
	// clocks say, per source, when its next row is due; made on the first
	// step.
	clocks []clock
}

// clock is when a source's next row is due, kept so that a step costs no
// division: rem holds the remainder of the division that gave the due
// time, and a row moves them on by mixScale's quotient q and remainder r by
// the weight w. left is the rows the source may still give.
type clock struct {
	due, rem int64
	q, r, w  int64
	left     int64
}

// tick moves the clock past the row it had due: t.due of the next one,
// without dividing, or math.MaxInt64 if the source has given all it may.
func (c *clock) tick() {
	if c.left--; c.left == 0 {
		c.due = math.MaxInt64
		return
	}
	c.due += c.q
	if c.rem += c.r; c.rem >= c.w {
		c.rem -= c.w
		c.due++
	}
}

// Walk starts a walk of mixed split s in epoch at position from.
func (m *Mix) Walk(epoch int64, split int, from int64) (*MixWalk, error) {
	if split < 0 || split >= m.o.NumSplits {
		return nil, fmt.Errorf("%w: split %d is not in [0, %d)", ErrPosition, split, m.o.NumSplits)
	}
	n := m.Len(epoch, split)
	if from < 0 || from > n {
		return nil, fmt.Errorf("%w: %d is not in mixed split %d's [0, %d]", ErrPosition, from, split, n)
	}
	w := &MixWalk{m: m, t: m.timeline(epoch, split), epoch: epoch, split: split, pos: from, end: n, counts: make([]int64, len(m.weight))}
	if from < n {
		if _, ok := w.t.at(from, w.counts); !ok {
			return nil, fmt.Errorf("permutation: internal error: mixed split %d position %d has no source", split, from)
		}
	}
	if m.o.Repeat {
		w.start = m.start(epoch, split)
	}
	return w, nil
}

// Next returns the row at the walk's position and moves past it; false at
// the end of the split's epoch.
func (w *MixWalk) Next() (MixRow, bool) {
	var one [1]int
	if w.NextSources(one[:]) == 0 {
		return MixRow{}, false
	}
	best := one[0]
	j := w.counts[best] - 1 // the row just taken
	if !w.m.o.Repeat {
		return MixRow{Source: best, Pass: w.epoch, Offset: j}, true
	}
	r := w.m.rows[best][w.split]
	g := w.start[best] + j
	return MixRow{Source: best, Pass: g / r, Offset: g % r}, true
}

// NextSources moves past the next len(dst) rows (fewer at the end of the
// split's epoch), writing each row's source into dst, and returns how many
// it moved past: Next without the rows' passes and offsets, for a reader
// that takes each source's rows in order.
func (w *MixWalk) NextSources(dst []int) int {
	if w.clocks == nil {
		w.startClocks()
	}
	want := int(min(int64(len(dst)), w.end-w.pos))
	n := w.nextDue(dst[:want], true)
	if n < want && want-n > len(w.clocks) {
		n += w.sweep(dst[n:want])
	}
	n += w.nextDue(dst[n:want], false)
	w.pos += int64(n)
	return n
}

// nextDue writes into dst the sources of the next rows, the earliest due
// first: all of them, or, with thisTime, only those due at the time of the
// first (rows due at one time go in source order, and a call may stop
// among them). It returns how many it wrote.
func (w *MixWalk) nextDue(dst []int, thisTime bool) int {
	clocks, counts := w.clocks, w.counts
	n := 0
	first := int64(-1)
	for ; n < len(dst); n++ {
		best, bestDue := -1, int64(math.MaxInt64)
		for k := range clocks {
			if d := clocks[k].due; d < bestDue {
				best, bestDue = k, d
			}
		}
		if best < 0 || thisTime && first >= 0 && bestDue != first {
			break
		}
		first = bestDue
		clocks[best].tick()
		counts[best]++
		dst[n] = best
	}
	return n
}

// sweep writes the sources of the next rows into dst, leaving room for the
// rows of one time unit, where no source has a cap (with one, it writes
// nothing): time runs on one unit at a time, and source k has a row due at
// time T where (T*W_k - F_k) passes a multiple of mixScale, which an
// accumulator per source says with an addition and a shift, no division
// and no branch (the earliest-due search costs a mispredicted branch on
// most rows). The rows of the time before have all been taken (nextDue
// finished it), so each source's accumulator starts at (T-1)*W_k - F_k
// modulo mixScale for the first time T still to come, and the clocks are
// set again from the counts at the end.
func (w *MixWalk) sweep(dst []int) int {
	type acc struct{ a, w, n int64 }
	var inline [4]acc
	accs := inline[:0]
	T := int64(math.MaxInt64)
	for k, c := range w.clocks {
		if w.t.caps[k] >= 0 {
			return 0
		}
		T = min(T, c.due)
	}
	for k, c := range w.clocks {
		// ((T-1)*W - F) mod mixScale, without overflow.
		a := ((T-1)%mixScale*c.w - w.t.phase[k]) % mixScale
		if a < 0 {
			a += mixScale
		}
		accs = append(accs, acc{a: a, w: c.w})
	}
	n, room := 0, len(dst)-len(accs)
	if len(accs) <= 4 && len(dst) >= 4 {
		var a, wk [4]int64
		for k, x := range accs {
			a[k], wk[k] = x.a, x.w
		}
		var after [4]int64
		var units int64
		n, after, units = sweep4(dst, a, wk)
		for k, x := range accs {
			// What the accumulator gained is the rows due times mixScale.
			accs[k].n = (units*x.w + x.a - after[k]) / mixScale
		}
		room = -1
	}
	for n <= room {
		for k := range accs {
			x := &accs[k]
			a := x.a + x.w
			e := a >> mixShift // 1 where a multiple of mixScale was passed
			x.a = a & (mixScale - 1)
			x.n += e
			dst[n] = k
			n += int(e)
		}
	}
	for k := range accs {
		w.counts[k] += accs[k].n
	}
	w.startClocks()
	return n
}

// startClocks sets when each source's next row is due, dividing once.
func (w *MixWalk) startClocks() {
	if len(w.clocks) != len(w.t.w) {
		w.clocks = make([]clock, len(w.t.w))
	}
	for k, wk := range w.t.w {
		c := clock{q: mixScale / wk, r: mixScale % wk, w: wk, left: math.MaxInt64}
		if cp := w.t.caps[k]; cp >= 0 {
			c.left = cp - w.counts[k]
		}
		if c.left <= 0 {
			c.due = math.MaxInt64
		} else {
			// due's numerator, as t.due divides it.
			num := w.counts[k]*mixScale + w.t.phase[k] + wk - 1
			c.due, c.rem = num/wk, num%wk
		}
		w.clocks[k] = c
	}
}

// Pos is the walk's position.
func (w *MixWalk) Pos() int64 { return w.pos }

// Taken appends to dst, for each source, the rows of it the split's epoch
// holds before the walk's position: what NextSources moved past, per
// source, is Taken after it less Taken before, at the cost of a copy
// rather than a count of every row.
func (w *MixWalk) Taken(dst []int64) []int64 { return append(dst, w.counts...) }

// Len is the rows of mixed split s in an epoch.
func (m *Mix) Len(epoch int64, split int) int64 {
	t := m.timeline(epoch, split)
	switch m.o.Epoch {
	case MixRows:
		n, per := int64(m.o.NumSplits), m.o.Rows/int64(m.o.NumSplits)
		if int64(split) < m.o.Rows%n {
			per++
		}
		// Without Repeat, or where no source has a row in this split, the
		// sources' rows bound it.
		var most int64
		for k := range m.rows {
			most += m.rows[k][split]
		}
		if !m.o.Repeat || most == 0 {
			per = min(per, most)
		}
		return per
	case MixSmallest:
		var end int64 = math.MaxInt64
		for k := range m.rows {
			if r := m.rows[k][split]; r > 0 {
				end = min(end, t.due(k, r-1))
			}
		}
		if end == math.MaxInt64 {
			return 0
		}
		return t.total(end)
	default:
		if !m.o.Repeat {
			var n int64
			for k := range m.rows {
				n += m.rows[k][split]
			}
			return n
		}
		var end int64
		for k := range m.rows {
			if r := m.rows[k][split]; r > 0 {
				end = max(end, t.due(k, r-1))
			}
		}
		return t.total(end)
	}
}

// MixRow is where a position of a mixed split comes from.
type MixRow struct {
	Source int
	// Pass is the source's epoch the row is from, and Offset its offset in
	// the source's split order of that epoch.
	Pass, Offset int64
}

// Locate returns where position i of mixed split s in epoch comes from.
func (m *Mix) Locate(epoch int64, split int, i int64) (MixRow, error) {
	if split < 0 || split >= m.o.NumSplits {
		return MixRow{}, fmt.Errorf("%w: split %d is not in [0, %d)", ErrPosition, split, m.o.NumSplits)
	}
	if n := m.Len(epoch, split); i < 0 || i >= n {
		return MixRow{}, fmt.Errorf("%w: %d is not in mixed split %d's [0, %d)", ErrPosition, i, split, n)
	}
	t := m.timeline(epoch, split)
	counts := make([]int64, len(m.weight))
	k, ok := t.at(i, counts)
	if !ok {
		return MixRow{}, fmt.Errorf("permutation: internal error: mixed split %d position %d has no source", split, i)
	}
	return m.row(epoch, split, k, counts[k]), nil
}

// row is the j-th row of source k in mixed split s of epoch.
func (m *Mix) row(epoch int64, split, k int, j int64) MixRow {
	r := m.rows[k][split]
	if !m.o.Repeat {
		return MixRow{Source: k, Pass: epoch, Offset: j}
	}
	g := m.start(epoch, split)[k] + j
	return MixRow{Source: k, Pass: g / r, Offset: g % r}
}

// Counts is the rows of each source that mixed split s takes in its first
// i positions of epoch.
func (m *Mix) Counts(epoch int64, split int, i int64) []int64 {
	t := m.timeline(epoch, split)
	counts := make([]int64, len(m.weight))
	if _, ok := t.at(i, counts); !ok {
		// Past the last row: every source's rows up to the end.
		for k := range counts {
			counts[k] = t.count(k, math.MaxInt64/4/mixScale)
		}
	}
	return counts
}

// Start is, per source, the rows of split s that the epochs before epoch
// took: where the epoch's rows of each source begin (with Repeat; without
// it every epoch begins a pass, and Start is zero).
func (m *Mix) Start(epoch int64, split int) []int64 {
	if !m.o.Repeat {
		return make([]int64, len(m.weight))
	}
	return append([]int64(nil), m.start(epoch, split)...)
}

// start is Start with Repeat, cached.
func (m *Mix) start(epoch int64, split int) []int64 {
	st := m.starts[split]
	if st == nil {
		st = [][]int64{make([]int64, len(m.weight))}
	}
	for int64(len(st)) <= epoch {
		e := int64(len(st) - 1)
		prev := st[e]
		took := m.Counts(e, split, m.Len(e, split))
		next := make([]int64, len(prev))
		for k := range next {
			next[k] = prev[k] + took[k]
		}
		st = append(st, next)
	}
	m.starts[split] = st
	return st[epoch]
}

// sweep4 is sweep's loop for at most four sources, their accumulators in
// registers (the loop over a slice of them costs twice as much); sources
// past the walk's have weight 0 and never have a row due. It returns the
// rows written, the accumulators after and the time units passed.
func sweep4(dst []int, a, w [4]int64) (int, [4]int64, int64) {
	a0, a1, a2, a3 := a[0], a[1], a[2], a[3]
	w0, w1, w2, w3 := w[0], w[1], w[2], w[3]
	n, room, units := 0, len(dst)-4, int64(0)
	for ; n <= room; units++ {
		a0 += w0
		e0 := a0 >> mixShift
		a0 &= mixScale - 1
		a1 += w1
		e1 := a1 >> mixShift
		a1 &= mixScale - 1
		a2 += w2
		e2 := a2 >> mixShift
		a2 &= mixScale - 1
		a3 += w3
		e3 := a3 >> mixShift
		a3 &= mixScale - 1
		dst[n] = 0
		n += int(e0)
		dst[n] = 1
		n += int(e1)
		dst[n] = 2
		n += int(e2)
		dst[n] = 3
		n += int(e3)
	}
	return n, [4]int64{a0, a1, a2, a3}, units
}
