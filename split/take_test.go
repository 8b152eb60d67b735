package split

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestPropertyTake: over random plans with known counts, every position of
// every split's order, and of the order one consumer takes all splits in
// (at two batch sizes), maps to exactly the row the simulator says the
// walk delivers there; positions just outside are ErrPosition.
func TestPropertyTake(t *testing.T) {
	t.Parallel()
	n := 1_000
	if testing.Short() {
		n = 200
	}
	failures := 0
	for i := range uint64(n) {
		pc := genCase(i+0x7a4e, false)
		if err := checkTake(pc); err != nil {
			t.Errorf("%v\n\tplan: %v", err, pc)
			if failures++; failures == 5 {
				t.FailNow()
			}
		}
	}
}

func checkTake(pc *planCase) error {
	s, err := newSim(pc)
	if err != nil {
		return fmt.Errorf("seed %d: plan: %w", pc.seed, err)
	}
	// row is the global row a split's offset maps to.
	row := func(sp int, q int64) (int64, error) {
		ref, off, err := s.ep.Seek(sp, q)
		if err != nil {
			return 0, err
		}
		if ref.Split != sp {
			return 0, fmt.Errorf("split %d offset %d sought in split %d", sp, q, ref.Split)
		}
		p, fr, err := s.ep.Row(ref, s.ep.WindowOrder(ref), off)
		if err != nil {
			return 0, err
		}
		piece := s.ep.Pieces(ref)[p]
		if fr < piece.Start || fr >= piece.End {
			return 0, fmt.Errorf("row %d outside its piece %+v", fr, piece)
		}
		return s.base[piece.Fragment] + fr, nil
	}
	rows := make([]int64, len(s.ep.Splits))
	for sp, seq := range s.seq {
		rows[sp] = s.ep.Splits[sp].Rows
		for q, want := range seq {
			got, err := row(sp, int64(q))
			if err != nil {
				return fmt.Errorf("seed %d: split %d offset %d: %w", pc.seed, sp, q, err)
			}
			if got != want {
				return fmt.Errorf("seed %d: split %d offset %d is row %d, the walk delivers %d", pc.seed, sp, q, got, want)
			}
		}
		for _, q := range []int64{-1, int64(len(seq))} {
			if _, _, err := s.ep.Seek(sp, q); !errors.Is(err, ErrPosition) {
				return fmt.Errorf("seed %d: split %d offset %d of %d: error %v, want ErrPosition", pc.seed, sp, q, len(seq), err)
			}
		}
	}
	r := rand.New(rand.NewPCG(pc.seed, 0x7a4e))
	for _, bs := range []int{1 + r.IntN(5), 1 + r.IntN(200)} {
		iv, err := NewInterleave(rows, bs)
		if err != nil {
			return err
		}
		var want []int64
		batches, _ := s.walk(0, 1, bs, make([]Cursor, len(rows)), 0, -1)
		for _, b := range batches {
			if want, err = s.rows(b, want); err != nil {
				return err
			}
		}
		if iv.Len() != int64(len(want)) {
			return fmt.Errorf("seed %d: interleave of %d rows, the walk delivers %d", pc.seed, iv.Len(), len(want))
		}
		for pos, w := range want {
			sp, q, err := iv.Locate(int64(pos))
			if err != nil {
				return fmt.Errorf("seed %d: batch size %d position %d: %w", pc.seed, bs, pos, err)
			}
			got, err := row(sp, q)
			if err != nil {
				return fmt.Errorf("seed %d: batch size %d position %d (split %d offset %d): %w", pc.seed, bs, pos, sp, q, err)
			}
			if got != w {
				return fmt.Errorf("seed %d: batch size %d position %d is row %d, the walk delivers %d", pc.seed, bs, pos, got, w)
			}
		}
		for _, pos := range []int64{-1, iv.Len()} {
			if _, _, err := iv.Locate(pos); !errors.Is(err, ErrPosition) {
				return fmt.Errorf("seed %d: position %d of %d: error %v, want ErrPosition", pc.seed, pos, iv.Len(), err)
			}
		}
	}
	return nil
}

func TestInterleaveUnknownCounts(t *testing.T) {
	if _, err := NewInterleave([]int64{3, -1}, 4); !errors.Is(err, ErrUnknownRows) {
		t.Fatalf("error %v, want ErrUnknownRows", err)
	}
}
