package split

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/sluicedata/sluice/permutation"
)

// Equal batches per rank (Epoch.EqualBatches, Schedule.Limit) over random
// plans: a job starts at one world size and batch size, every rank stops at
// the same random step (ranks of a data-parallel job run in lockstep), and
// the merged cursors resume on another world size and batch size, twice.
// At every stretch every rank takes exactly EqualBatches batches, a rank's
// own resume (its cursors and the batches left) continues its walk batch
// for batch, and each split delivers a prefix of its rows in order: what
// a rank leaves is the tail of its own sequence, and at least one rank
// leaves nothing, so no more is left than equality needs.
func TestPropertyEqualBatches(t *testing.T) {
	t.Parallel()
	start := time.Now()
	n := 3000
	if testing.Short() {
		n = 500
	}
	failures := 0
	for i := range uint64(n) {
		pc := genCase(0xe9a1<<40+i, false)
		if err := checkEqual(pc); err != nil {
			t.Errorf("%v\n\tplan: %v", err, pc)
			if failures++; failures == 5 {
				t.FailNow()
			}
		}
	}
	t.Logf("%d random plans checked in %v", n, time.Since(start).Round(time.Millisecond))
}

// Unknown counts, counted: a counting pass's chunk counts (the rows their
// units turn out to hold) give the epoch its windows' and splits' counts,
// and equal batches hold as with counts the plan knows.
func TestPropertyEqualBatchesCounted(t *testing.T) {
	t.Parallel()
	n := 2000
	if testing.Short() {
		n = 300
	}
	for i := range uint64(n) {
		pc := genCase(unknownSeeds|0xc0<<40+i, true)
		if err := checkEqual(pc); err != nil {
			t.Fatalf("%v\n\tplan: %v", err, pc)
		}
	}
}

func checkEqual(pc *planCase) error {
	s, err := newSim(pc)
	if err != nil {
		return fmt.Errorf("seed %d: plan: %w", pc.seed, err)
	}
	if !s.known() {
		// A counting pass: each chunk's rows as read.
		rows := make([]int64, len(s.chunks))
		for i, c := range s.chunks {
			rows[i] = -1
			if c.Rows() < 0 {
				rows[i] = s.starts[c.Fragment][c.EndUnit] - s.starts[c.Fragment][c.FirstUnit]
			}
		}
		before := make([][]Window, len(s.ep.Windows))
		for sp, ws := range s.ep.Windows {
			before[sp] = slices.Clone(ws)
		}
		if err := s.ep.Count(rows); err != nil {
			return fmt.Errorf("seed %d: count: %w", pc.seed, err)
		}
		for sp, ws := range s.ep.Windows {
			var total int64
			for w, win := range ws {
				if win.First != before[sp][w].First || win.End != before[sp][w].End || win.Rows != int64(len(s.emit[sp][w])) {
					return fmt.Errorf("seed %d: counted split %d window %d is %+v, holds %d rows", pc.seed, sp, w, win, len(s.emit[sp][w]))
				}
				total += win.Rows
			}
			if s.ep.Splits[sp].Rows != total {
				return fmt.Errorf("seed %d: counted split %d says %d rows, its windows %d", pc.seed, sp, s.ep.Splits[sp].Rows, total)
			}
		}
	}
	r := rand.New(rand.NewPCG(pc.seed, 0xe9))
	n := pc.order.NumSplits
	ds := divisors(n)
	cursors := make([]Cursor, n)
	got := make([][]int64, n)
	for stretch := range 3 {
		world, bs := ds[r.IntN(len(ds))], 1+r.IntN(50)
		if r.IntN(3) == 0 {
			bs = 1 + r.IntN(4)
		}
		want, err := s.ep.EqualBatches(world, bs, cursors)
		if err != nil {
			return fmt.Errorf("seed %d: %w", pc.seed, err)
		}
		// Every rank stops at the same step, or runs to the end of the
		// epoch in the last stretch.
		stop := int(want)
		if stretch < 2 {
			stop = r.IntN(int(want) + 1)
		}
		merged := make([][]Cursor, world)
		exhausted := false
		for rank := range world {
			natural := s.ep.RankBatches(rank, world, bs, cursors)
			full := s.limited(rank, world, bs, cursors, 0, want)
			if int64(len(full)) != want {
				return fmt.Errorf("seed %d stretch %d world %d batch %d: rank %d takes %d batches, every rank should take %d", pc.seed, stretch, world, bs, rank, len(full), want)
			}
			if natural == want {
				exhausted = true
			}
			for _, b := range full {
				if b.Rows == 0 {
					return fmt.Errorf("seed %d: rank %d takes an empty batch", pc.seed, rank)
				}
			}
			// A rank's own resume at every step: its cursors and the
			// batches every rank has left continue the walk exactly.
			for k := 0; k <= len(full); k += 1 + len(full)/5 {
				own, next := slices.Clone(cursors), 0
				for _, b := range full[:k] {
					own[b.Split], next = b.After, b.Next
				}
				rest := s.limited(rank, world, bs, own, next, want-int64(k))
				if len(rest) != len(full)-k {
					return fmt.Errorf("seed %d: rank %d resumed after %d of %d batches takes %d", pc.seed, rank, k, len(full), len(rest))
				}
				for i, b := range rest {
					if w := full[k+i]; b.Split != w.Split || b.After != w.After || !slices.Equal(b.Parts, w.Parts) {
						return fmt.Errorf("seed %d: rank %d resumed after %d batches: batch %d is %+v, was %+v", pc.seed, rank, k, i, b, w)
					}
				}
			}
			merged[rank] = slices.Clone(cursors)
			for _, b := range full[:stop] {
				if got[b.Split], err = s.rows(b, got[b.Split]); err != nil {
					return fmt.Errorf("seed %d: %w", pc.seed, err)
				}
				merged[rank][b.Split] = b.After
			}
		}
		if world > 0 && !exhausted && want > 0 {
			return fmt.Errorf("seed %d stretch %d world %d batch %d: every rank leaves batches beyond the %d all take", pc.seed, stretch, world, bs, want)
		}
		if cursors, err = MergeCursors(world, merged); err != nil {
			return err
		}
	}
	for sp := range n {
		if !slices.Equal(got[sp], s.seq[sp][:len(got[sp])]) {
			return fmt.Errorf("seed %d: split %d delivers %v, not a prefix of its rows %v", pc.seed, sp, head(got[sp]), head(s.seq[sp]))
		}
	}
	return nil
}

// limited is rank's walk from cursors, limited to left batches.
func (s *sim) limited(rank, world, bs int, cursors []Cursor, next int, left int64) []Batch {
	sc := NewSchedule(s.ep, rank, world, bs, cursors, next)
	sc.RowsOf = s.rowsOf
	sc.Limit(left)
	var out []Batch
	for {
		b, ok := sc.Step(nil)
		if !ok {
			return out
		}
		if b.Rows > 0 {
			out = append(out, b)
		}
	}
}

func TestEqualBatchesUnknownCounts(t *testing.T) {
	chunks := Chunks([]File{{Units: []Unit{{Rows: -1, Bytes: 10}, {Rows: 5, Bytes: 10}}}}, ChunkOptions{TargetBytes: 1})
	ep, err := NewEpoch(chunks, permutation.Order{NumSplits: 2, ShuffleWindow: 100}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ep.EqualBatches(2, 3, make([]Cursor, 2)); !errors.Is(err, ErrUnknownRows) {
		t.Fatalf("equal batches of unknown counts: %v, want ErrUnknownRows", err)
	}
}
