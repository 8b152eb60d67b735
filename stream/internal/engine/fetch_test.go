package engine

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/sluicedata/sluice/permutation"
	"github.com/sluicedata/sluice/split"
)

// The fetch planner's promise, bytes fetched once and requests joined only
// within bounds, checked over seeded random plans as package split checks
// its own: the plans are drawn the same way (files of units whose counts
// may be hidden from the planner, chunk options, order), and each rank's
// read order is walked with the counts a reader would learn by decoding.

// fetchCase is one random plan with the rows its units really hold.
type fetchCase struct {
	seed   uint64
	order  permutation.Order
	files  []split.File
	truth  [][]int64
	chunks []split.Chunk
	ep     *split.Epoch
	// unitJoin is the planner's UnitJoinBytes.
	unitJoin int64
}

func genFetchCase(seed uint64, unknown bool) (*fetchCase, error) {
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	// Cut paged units come from a generator of their own, so that a seed's
	// other draws stay as they were (see split's sim_test.go).
	rc := rand.New(rand.NewPCG(seed, 0xc077))
	cutting := rc.IntN(2) == 0
	fc := &fetchCase{seed: seed}
	maxRows := []int{1, 4, 30, 120, 400}[r.IntN(5)]
	perRow := []int64{0, 1, 100, 10_000, 150_000}[r.IntN(5)]
	for range r.IntN(7) {
		var f split.File
		var truth []int64
		hide := unknown && r.IntN(3) > 0
		for range r.IntN(9) {
			n := int64(r.IntN(maxRows + 1))
			if r.IntN(6) == 0 {
				n = 0
			}
			u := split.Unit{Rows: n, Bytes: n*perRow + int64(r.IntN(64))}
			if cutting && rc.IntN(2) == 0 {
				u.Paged = true
				u.Rows = n * int64(1+rc.IntN(12))
				u.Bytes = u.Rows*perRow + int64(rc.IntN(64))
				n = u.Rows
			}
			if hide && r.IntN(3) > 0 {
				u.Rows = -1
			}
			f.Units = append(f.Units, u)
			truth = append(truth, n)
		}
		fc.files = append(fc.files, f)
		fc.truth = append(fc.truth, truth)
	}
	var co split.ChunkOptions
	if r.IntN(4) > 0 {
		co.TargetBytes = 1 + r.Int64N(int64(maxRows)*(perRow+32)*3+1)
	}
	if r.IntN(2) == 0 {
		co.MaxRows = 1 + r.Int64N(int64(maxRows)*3)
	}
	fc.order = permutation.Order{
		Shuffle:       r.IntN(3) > 0,
		Seed:          r.Uint64(),
		ClumpSize:     r.IntN(12),
		ShuffleWindow: r.IntN(maxRows*6 + 2),
		NumSplits:     1 + r.IntN(8),
		DropRemainder: !unknown && r.IntN(3) == 0,
	}
	if r.IntN(2) == 0 {
		fc.order.NumSplits = 1 + r.IntN(64)
	}
	if cutting {
		co.CutRows = int64(max(fc.order.ShuffleWindow, 1))
		co.CutBytes = rc.Int64N(int64(maxRows)*(perRow+1)*2 + 1)
		fc.unitJoin = []int64{0, JoinBytes + 1 + rc.Int64N(JoinBytes), 1 << 40}[rc.IntN(3)]
	}
	fc.chunks = split.Chunks(fc.files, co)
	ep, err := split.NewEpoch(fc.chunks, fc.order, r.Int64N(4))
	fc.ep = ep
	return fc, err
}

// rowsOf is a window's rows as a reader learns them by decoding.
func (fc *fetchCase) rowsOf(ref split.WindowRef) int64 {
	var n int64
	for _, p := range fc.ep.Pieces(ref) {
		if p.Start >= 0 {
			n += p.End - p.Start
			continue
		}
		for _, k := range fc.truth[p.Fragment][p.FirstUnit:p.EndUnit] {
			n += k
		}
	}
	return n
}

// walk is one rank's batches from the given cursors to the end.
func (fc *fetchCase) walk(rank, world, batchSize int, cursors []split.Cursor) []split.Batch {
	sc := split.NewSchedule(fc.ep, rank, world, batchSize, cursors, 0)
	sc.RowsOf = fc.rowsOf
	var out []split.Batch
	for {
		b, ok := sc.Step(func(split.WindowRef) {})
		if !ok {
			return out
		}
		out = append(out, b)
	}
}

// Seeds of plans with unknown counts carry this bit, as in package split.
const unknownSeeds = 1 << 32

func TestPropertyFetchGroups(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		base uint64
		n    int
	}{{0, 10_000}, {unknownSeeds, 4_000}} {
		failures := 0
		for i := range uint64(c.n) {
			seed := c.base + i
			fc, err := genFetchCase(seed, c.base != 0)
			if err == nil {
				err = fc.checkFetch(rand.New(rand.NewPCG(seed, 0xc4ec)))
			}
			if err != nil {
				t.Errorf("seed %d: fetch groups: %v", seed, err)
				if failures++; failures == 5 {
					t.FailNow()
				}
			}
		}
	}
}

// divisors are the world sizes an epoch of n splits can run at.
func divisors(n int) []int {
	var out []int
	for d := 1; d <= n; d++ {
		if n%d == 0 {
			out = append(out, d)
		}
	}
	return out
}

func sameSet(a, b []split.WindowRef) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	cmpRef := func(x, y split.WindowRef) int { return x.Split*1_000_000 + x.Window - (y.Split*1_000_000 + y.Window) }
	slices.SortFunc(a, cmpRef)
	slices.SortFunc(b, cmpRef)
	return slices.Equal(a, b)
}

// checkFetch: for the read order of every rank at one world size (its
// first touches, as a reader walks it with estimated counts), every piece
// of every window is in exactly one group; a group's range is contiguous
// rows (units, where counts are unknown) of one file made of exactly its
// pieces; it is made by the earliest window in read order holding one of
// them, holds pieces only of the windows within Ahead of that one (or of
// later windows of its split, where they go on in the unit the piece before
// them ends in), and takes a later window's piece only while the group, in
// row order up to and including that piece, stays within JoinBytes (or
// UnitJoinBytes, where the piece goes on in a unit).
func (s *fetchCase) checkFetch(r *rand.Rand) error {
	n := s.order.NumSplits
	ds := divisors(n)
	world, bs, ahead := ds[r.IntN(len(ds))], 1+r.IntN(200), 1+r.IntN(8)
	resumed := r.IntN(2) == 0
	for rank := range world {
		// Half the time the rank resumes from a random batch boundary of
		// its walk: the read order then starts inside a window.
		cursors, next := make([]split.Cursor, n), 0
		if resumed {
			full := s.walk(rank, world, bs, cursors)
			for _, b := range full[:r.IntN(len(full)+1)] {
				cursors[b.Split], next = b.After, b.Next
			}
		}
		sc := split.NewSchedule(s.ep, rank, world, bs, cursors, next)
		var order []split.WindowRef
		for {
			if _, ok := sc.Step(func(w split.WindowRef) { order = append(order, w) }); !ok {
				break
			}
		}
		var all []split.WindowRef
		for _, sp := range split.Owned(n, rank, world) {
			for w := cursors[sp].Window; w < len(s.ep.Windows[sp]); w++ {
				all = append(all, split.WindowRef{Split: sp, Window: w})
			}
		}
		if len(order) != len(all) || !sameSet(order, all) {
			return fmt.Errorf("world %d rank %d from %v: read order %v, windows left %v", world, rank, cursors, order, all)
		}
		ramp := r.IntN(3) * r.IntN(len(order)+1) // none a third of the time
		if err := s.checkGroups(order, ahead, ramp); err != nil {
			return fmt.Errorf("world %d rank %d batch size %d Ahead %d Ramp %d (resumed %t): %w", world, rank, bs, ahead, ramp, resumed, err)
		}
	}
	return nil
}

// member is a piece of a group: the window that reads it, at which place
// of the read order, and the piece.
type member struct {
	at    at
	k     int
	piece split.Piece
}

func (s *fetchCase) checkGroups(order []split.WindowRef, ahead, ramp int) error {
	fp := NewFetches(s.ep, s.chunks, ahead)
	fp.UnitJoinBytes = s.unitJoin
	fp.Ramp = ramp
	pos := map[split.WindowRef]int{}
	for k, w := range order {
		pos[w] = k
	}
	owner := map[*Group]int{}
	members := map[*Group][]member{}
	var made []*Group
	for k, w := range order {
		task := fp.Plan(order[k:])
		pieces := s.ep.Pieces(w)
		if task.Ref != w || len(task.Pieces) != len(pieces) {
			return fmt.Errorf("task of %v is %v with %d pieces, the window has %d", w, task.Ref, len(task.Pieces), len(pieces))
		}
		for _, g := range task.Owned {
			if _, dup := owner[g]; dup {
				return fmt.Errorf("group %d is made twice", g.ID)
			}
			if g.ID != len(made) {
				return fmt.Errorf("group %d is the %d-th made", g.ID, len(made))
			}
			owner[g] = k
			made = append(made, g)
		}
		for i, g := range task.Pieces {
			if g == nil {
				return fmt.Errorf("window %v piece %d has no group when its window is planned", w, i)
			}
			if _, ok := owner[g]; !ok {
				return fmt.Errorf("window %v piece %d is in a group no window made", w, i)
			}
			members[g] = append(members[g], member{at{w, i}, k, pieces[i]})
		}
	}
	if len(fp.claimed) != 0 {
		return fmt.Errorf("%d windows hold claims after the last was planned", len(fp.claimed))
	}
	// The same read order plans the same fetches.
	again := NewFetches(s.ep, s.chunks, ahead)
	again.UnitJoinBytes = s.unitJoin
	again.Ramp = ramp
	for k := range order {
		for _, g := range again.Plan(order[k:]).Owned {
			if g.ID >= len(made) || g.Range != made[g.ID].Range || g.Bytes != made[g.ID].Bytes {
				return fmt.Errorf("a second planner makes group %d %+v, the first made %d groups", g.ID, g.Range, len(made))
			}
		}
	}
	for _, g := range made {
		ms := members[g]
		if len(ms) == 0 {
			return fmt.Errorf("group %d %+v holds no piece", g.ID, g.Range)
		}
		known := g.Range.Start >= 0
		slices.SortFunc(ms, func(a, b member) int {
			if known {
				return int(a.piece.Start - b.piece.Start)
			}
			return a.piece.FirstUnit - b.piece.FirstUnit
		})
		first := ms[0].k
		var size, bytes int64
		for i, m := range ms {
			p := m.piece
			first = min(first, m.k)
			if p.Fragment != g.Range.Fragment || (p.Start >= 0) != known {
				return fmt.Errorf("group %d %+v holds piece %+v", g.ID, g.Range, p)
			}
			// The pieces tile the range, in row (or unit) order.
			var prev, end int64
			if known {
				prev, end = g.Range.Start, p.Start
				if i > 0 {
					prev = ms[i-1].piece.End
				}
			} else {
				prev, end = int64(g.Range.FirstUnit), int64(p.FirstUnit)
				if i > 0 {
					prev = int64(ms[i-1].piece.EndUnit)
				}
			}
			if prev != end {
				return fmt.Errorf("group %d %+v: piece %+v does not follow at %d", g.ID, g.Range, p, prev)
			}
			goesOn := i > 0 && s.unitJoin > JoinBytes && sameUnit(ms[i-1].piece, p)
			if m.k-owner[g] >= ahead && !(goesOn && m.at.w.Split == order[owner[g]].Split) {
				return fmt.Errorf("group %d made at read %d holds a piece of read %d (Ahead %d)", g.ID, owner[g], m.k, ahead)
			}
			b := fp.bytes(p)
			size += b
			bytes += b
			limit := int64(JoinBytes)
			if owner[g] < ramp {
				limit = 0 // the first windows join nothing later
			}
			if i > 0 && sameUnit(ms[i-1].piece, p) {
				limit = max(limit, s.unitJoin)
			}
			if m.k != owner[g] && size > limit {
				return fmt.Errorf("group %d %+v joins piece %+v of read %d (made at read %d) at %d bytes, limit %d", g.ID, g.Range, p, m.k, owner[g], size, limit)
			}
		}
		last := ms[len(ms)-1].piece
		if known && last.End != g.Range.End || !known && last.EndUnit != g.Range.EndUnit {
			return fmt.Errorf("group %d %+v: its pieces end at %+v", g.ID, g.Range, last)
		}
		if first != owner[g] {
			return fmt.Errorf("group %d made at read %d, its earliest piece is read at %d", g.ID, owner[g], first)
		}
		if bytes != g.Bytes {
			return fmt.Errorf("group %d says %d bytes, its pieces %d", g.ID, g.Bytes, bytes)
		}
	}
	return nil
}

// Large pieces of later windows do not join a fetch past JoinBytes: four
// adjacent windows of 3 MiB each make two fetches, not one of 12 MiB. The
// window's own pieces always join, whatever their size.
func TestPropertyFetchJoinBytes(t *testing.T) {
	const mib = 1 << 20
	var chunks []split.Chunk
	var sp split.Split
	var windows []split.Window
	for i := range 4 {
		lo, hi := int64(i)*100, int64(i+1)*100
		chunks = append(chunks, split.Chunk{Fragment: 0, Start: lo, End: hi, FirstUnit: i, EndUnit: i + 1, Bytes: 3 * mib})
		sp.Pieces = append(sp.Pieces, split.Piece{Chunk: i, Fragment: 0, Start: lo, End: hi, FirstUnit: i, EndUnit: i + 1})
		windows = append(windows, split.Window{First: i, End: i + 1, Rows: 100})
	}
	sp.Rows = 400
	ep := &split.Epoch{Splits: []split.Split{sp}, Windows: [][]split.Window{windows}}
	order := []split.WindowRef{{Split: 0, Window: 0}, {Split: 0, Window: 1}, {Split: 0, Window: 2}, {Split: 0, Window: 3}}
	fp := NewFetches(ep, chunks, 4)
	var fetches [][2]int64
	for k := range order {
		for _, g := range fp.Plan(order[k:]).Owned {
			fetches = append(fetches, [2]int64{g.Range.Start, g.Range.End})
		}
	}
	if want := [][2]int64{{0, 200}, {200, 400}}; !slices.Equal(fetches, want) {
		t.Errorf("fetches %v, want %v", fetches, want)
	}

	// One window of four 3 MiB pieces is one fetch of 12 MiB.
	ep.Windows[0] = []split.Window{{First: 0, End: 4, Rows: 400}}
	fp = NewFetches(ep, chunks, 4)
	task := fp.Plan([]split.WindowRef{{Split: 0, Window: 0}})
	if len(task.Owned) != 1 || task.Owned[0].Range.Start != 0 || task.Owned[0].Range.End != 400 || task.Owned[0].Bytes != 12*mib {
		t.Errorf("a window's own adjacent pieces: %d fetches, want one of rows [0, 400)", len(task.Owned))
	}
}
