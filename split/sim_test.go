package split

import (
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/sluicedata/sluice/permutation"
)

// This file is a pure simulator of what an epoch delivers, written against
// the plan's definitions rather than its code, so that the property tests
// can hold the plan to them:
//
//   - a row is (file, row of the file), numbered densely across files;
//   - a window's rows are its pieces' rows concatenated in piece order,
//     piece p covering the file's rows [p.Start, p.End), or where counts are
//     unknown the rows its units [p.FirstUnit, p.EndUnit) turn out to hold;
//   - with Passes k > 1, chunk c's rows are counted from its first in clumps
//     of max(ClumpSize, 1), clump j belongs to pass j mod k, the chunk order
//     moves k places per chunk (place i being pass i mod k of chunk i / k),
//     and a piece keeps only its pass's rows of [p.Start, p.End);
//   - a window emits its rows in Epoch.RowOrder order (nil: storage order);
//   - a batch's Part takes the emission positions [From, To) of its window.

// planCase is one random plan: the files as the planner sees them, the rows
// their units really hold, and the options.
type planCase struct {
	seed  uint64
	files []File
	// truth holds, per file and unit, the rows reading the unit yields: its
	// Rows where known, a count only the test knows where Rows is -1.
	truth   [][]int64
	chunk   ChunkOptions
	order   permutation.Order
	epoch   int64
	unknown bool // some units may have Rows -1
}

// genCase makes the plan of one seed. unknown lets files hide some of their
// units' counts.
func genCase(seed uint64, unknown bool) *planCase {
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	// Paged units larger than the window, and their cutting, come from a
	// generator of their own, so that the other draws of a seed stay as
	// they were before cutting existed.
	rc := rand.New(rand.NewPCG(seed, 0xc077))
	cutting := rc.IntN(3) == 0
	pc := &planCase{seed: seed, unknown: unknown}
	// Per plan scales, so that plans range from a handful of rows to
	// thousands, and chunks from a few bytes to well past JoinBytes.
	maxRows := []int{1, 4, 30, 120, 400}[r.IntN(5)]
	perRow := []int64{0, 1, 100, 10_000, 150_000}[r.IntN(5)]
	for range r.IntN(7) {
		var f File
		var truth []int64
		hide := unknown && r.IntN(3) > 0
		for range r.IntN(9) {
			n := int64(r.IntN(maxRows + 1))
			if r.IntN(6) == 0 {
				n = 0
			}
			u := Unit{Rows: n, Bytes: n*perRow + int64(r.IntN(64))}
			if cutting && rc.IntN(2) == 0 {
				u.Paged = true
				if rc.IntN(2) == 0 {
					// Larger than most windows: a row group of a million
					// rows read with a window of 65536.
					u.Rows = n * int64(2+rc.IntN(12))
					u.Bytes = u.Rows*perRow + int64(rc.IntN(64))
					n = u.Rows
				}
			}
			if hide && r.IntN(3) > 0 {
				u.Rows = -1
			}
			f.Units = append(f.Units, u)
			truth = append(truth, n)
		}
		pc.files = append(pc.files, f)
		pc.truth = append(pc.truth, truth)
	}
	if r.IntN(4) > 0 {
		pc.chunk.TargetBytes = 1 + r.Int64N(int64(maxRows)*(perRow+32)*3+1)
	}
	if r.IntN(2) == 0 {
		pc.chunk.MaxRows = 1 + r.Int64N(int64(maxRows)*3)
	}
	pc.order = permutation.Order{
		Shuffle:       r.IntN(3) > 0,
		Seed:          r.Uint64(),
		ClumpSize:     r.IntN(12),
		ShuffleWindow: r.IntN(maxRows*6 + 2),
		NumSplits:     1 + r.IntN(8),
		DropRemainder: !unknown && r.IntN(3) == 0,
	}
	if r.IntN(2) == 0 {
		pc.order.NumSplits = 1 + r.IntN(64)
	}
	pc.epoch = r.Int64N(4)
	if !unknown && r.IntN(3) == 0 {
		pc.order.Passes = 2 + r.IntN(7)
	}
	if cutting {
		// Cut at the window, as a stream does, or at any size.
		pc.chunk.CutRows = int64(max(pc.order.ShuffleWindow, 1))
		if rc.IntN(3) == 0 {
			pc.chunk.CutRows = 1 + rc.Int64N(int64(maxRows)*2)
		}
		if rc.IntN(2) == 0 {
			pc.chunk.CutBytes = rc.Int64N(int64(maxRows)*(perRow+1)*2 + 1)
		}
	}
	return pc
}

// String is the plan's shape, for failure messages: each file's units
// (rows as read, "?" marking a count the plan does not know) and the
// options.
func (pc *planCase) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "seed %d (unknown %t) epoch %d %+v %+v files:", pc.seed, pc.unknown, pc.epoch, pc.chunk, pc.order)
	for f, file := range pc.files {
		fmt.Fprintf(&b, " %d[", f)
		for i, u := range file.Units {
			if i > 0 {
				b.WriteByte(' ')
			}
			if u.Rows < 0 {
				b.WriteByte('?')
			}
			fmt.Fprintf(&b, "%d/%dB", pc.truth[f][i], u.Bytes)
		}
		b.WriteByte(']')
	}
	return b.String()
}

// sim is a plan's epoch and everything the simulator derives from it.
type sim struct {
	pc     *planCase
	chunks []Chunk
	ep     *Epoch
	// base is, per file, the number of its first row; starts, per file, the
	// first row of each of its units as read, and the file's row count.
	base   []int64
	starts [][]int64
	total  int64
	// emit holds, per split and window, the window's rows in emission
	// order; seq, per split, all its rows in the order it emits them.
	emit [][][]int64
	seq  [][]int64
}

func newSim(pc *planCase) (*sim, error) {
	s := &sim{pc: pc, chunks: Chunks(pc.files, pc.chunk)}
	for _, truth := range pc.truth {
		s.base = append(s.base, s.total)
		st := []int64{0}
		for _, n := range truth {
			st = append(st, st[len(st)-1]+n)
		}
		s.starts = append(s.starts, st)
		s.total += st[len(st)-1]
	}
	ep, err := NewEpoch(s.chunks, pc.order, pc.epoch)
	if err != nil {
		return nil, err
	}
	s.ep = ep
	if len(ep.Splits) != pc.order.NumSplits || len(ep.Windows) != pc.order.NumSplits {
		return nil, fmt.Errorf("%d splits and %d window lists, NumSplits %d", len(ep.Splits), len(ep.Windows), pc.order.NumSplits)
	}
	s.emit = make([][][]int64, len(ep.Splits))
	s.seq = make([][]int64, len(ep.Splits))
	for sp, ws := range ep.Windows {
		next := 0
		for wi, w := range ws {
			if w.First != next || w.End <= w.First || w.End > len(ep.Splits[sp].Pieces) {
				return nil, fmt.Errorf("split %d window %d %+v after piece %d of %d", sp, wi, w, next, len(ep.Splits[sp].Pieces))
			}
			next = w.End
			ref := WindowRef{sp, wi}
			var rows []int64
			var segs []int64
			for _, p := range ep.Pieces(ref) {
				kept, err := s.kept(p)
				if err != nil {
					return nil, fmt.Errorf("split %d window %d: %w", sp, wi, err)
				}
				if p.Rows() >= 0 && p.Rows() != int64(len(kept)) {
					return nil, fmt.Errorf("split %d window %d: piece %+v says %d rows, keeps %d", sp, wi, p, p.Rows(), len(kept))
				}
				for _, x := range kept {
					rows = append(rows, s.base[p.Fragment]+x)
				}
				segs = append(segs, int64(len(kept)))
			}
			if w.Rows >= 0 && w.Rows != int64(len(rows)) {
				return nil, fmt.Errorf("split %d window %d says %d rows, its pieces hold %d", sp, wi, w.Rows, len(rows))
			}
			order := ep.RowOrder(ref, segs)
			if order != nil {
				if len(order) != len(rows) {
					return nil, fmt.Errorf("split %d window %d: RowOrder has %d entries for %d rows", sp, wi, len(order), len(rows))
				}
				out := make([]int64, len(rows))
				seen := make([]bool, len(rows))
				for i, k := range order {
					if k < 0 || int(k) >= len(rows) || seen[k] {
						return nil, fmt.Errorf("split %d window %d: RowOrder is not a permutation (%d at %d)", sp, wi, k, i)
					}
					seen[k] = true
					out[i] = rows[k]
				}
				rows = out
			}
			s.emit[sp] = append(s.emit[sp], rows)
			s.seq[sp] = append(s.seq[sp], rows...)
		}
		if next != len(ep.Splits[sp].Pieces) {
			return nil, fmt.Errorf("split %d: windows cover %d of %d pieces", sp, next, len(ep.Splits[sp].Pieces))
		}
	}
	return s, nil
}

// span is the rows of its file piece p covers, as read.
func (s *sim) span(p Piece) (lo, hi int64, err error) {
	if p.Fragment < 0 || p.Fragment >= len(s.pc.files) {
		return 0, 0, fmt.Errorf("piece %+v of a file that does not exist", p)
	}
	st := s.starts[p.Fragment]
	if p.FirstUnit < 0 || p.EndUnit > len(st)-1 || p.FirstUnit >= p.EndUnit {
		return 0, 0, fmt.Errorf("piece %+v: units out of the file's %d", p, len(st)-1)
	}
	if p.Start < 0 {
		if p.End >= 0 || s.pc.files[p.Fragment].Rows() >= 0 {
			return 0, 0, fmt.Errorf("piece %+v: unknown rows in a file of known counts", p)
		}
		return st[p.FirstUnit], st[p.EndUnit], nil
	}
	// Known rows lie within the units the piece names.
	if p.End <= p.Start || p.Start < st[p.FirstUnit] || p.End > st[p.EndUnit] {
		return 0, 0, fmt.Errorf("piece %+v: rows outside its units' [%d, %d)", p, st[p.FirstUnit], st[p.EndUnit])
	}
	return p.Start, p.End, nil
}

// kept is the rows of its file piece p delivers, in file order: those of
// its span that its pass keeps, by the definition above.
func (s *sim) kept(p Piece) ([]int64, error) {
	lo, hi, err := s.span(p)
	if err != nil {
		return nil, err
	}
	o := s.pc.order
	if o.Passes > 1 {
		c := s.chunks[p.Chunk]
		if p.Pass.Of != o.Passes || p.Pass.Index < 0 || p.Pass.Index >= o.Passes || p.Pass.Base != c.Start || p.Pass.Clump != int64(max(o.ClumpSize, 1)) {
			return nil, fmt.Errorf("piece %+v of chunk %+v: not a pass of %d over clumps of %d", p, c, o.Passes, max(o.ClumpSize, 1))
		}
	} else if p.Pass != (Pass{}) {
		return nil, fmt.Errorf("piece %+v has a pass in an epoch of one", p)
	}
	var out []int64
	for x := lo; x < hi; x++ {
		if s.passOf(p.Chunk, x) == p.Pass.Index {
			out = append(out, x)
		}
	}
	return out, nil
}

// passOf is the pass that reads row x of chunk c (0 in an epoch of one).
func (s *sim) passOf(c int, x int64) int {
	o := s.pc.order
	if o.Passes <= 1 {
		return 0
	}
	return int((x - s.chunks[c].Start) / int64(max(o.ClumpSize, 1)) % int64(o.Passes))
}

// rowsOf is what the cutting walk of a reader learns by decoding: a
// window's rows as read.
func (s *sim) rowsOf(r WindowRef) int64 { return int64(len(s.emit[r.Split][r.Window])) }

// walk is one rank's batches from the given cursors to the end (or to max
// batches, if max >= 0), cut with the true counts, with the windows it
// first touches in order.
func (s *sim) walk(rank, world, batchSize int, cursors []Cursor, next, max int) ([]Batch, []WindowRef) {
	sc := NewSchedule(s.ep, rank, world, batchSize, cursors, next)
	sc.RowsOf = s.rowsOf
	var out []Batch
	var touched []WindowRef
	for max < 0 || len(out) < max {
		b, ok := sc.Step(func(r WindowRef) { touched = append(touched, r) })
		if !ok {
			break
		}
		out = append(out, b)
	}
	return out, touched
}

// rows are the rows batch b delivers, in order, or an error if a part is
// not a range of its window.
func (s *sim) rows(b Batch, dst []int64) ([]int64, error) {
	var n int64
	for _, p := range b.Parts {
		if p.Ref.Split != b.Split || p.Ref.Window < 0 || p.Ref.Window >= len(s.emit[b.Split]) {
			return nil, fmt.Errorf("batch %d of split %d has a part of window %+v", b.Seq, b.Split, p.Ref)
		}
		e := s.emit[b.Split][p.Ref.Window]
		if p.From < 0 || p.From > p.To || p.To > int64(len(e)) {
			return nil, fmt.Errorf("batch %d part %+v is not within its window's %d rows", b.Seq, p, len(e))
		}
		if p.Last != (p.To == int64(len(e))) {
			return nil, fmt.Errorf("batch %d part %+v: Last is %t, window has %d rows", b.Seq, p, p.Last, len(e))
		}
		dst = append(dst, e[p.From:p.To]...)
		n += p.To - p.From
	}
	if n != b.Rows {
		return nil, fmt.Errorf("batch %d says %d rows, its parts hold %d", b.Seq, b.Rows, n)
	}
	return dst, nil
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
