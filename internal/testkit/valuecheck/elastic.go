package valuecheck

import (
	"fmt"
	"slices"
	"testing"

	"github.com/sluicedata/sluice/split"
)

// Elastic checks a stream's first two promises (exactly once, elastic
// determinism) over one epoch read at each world size of worlds, each a
// divisor of splits, the first the reference. read(world, rank) opens the
// stream as that rank sees it and returns the ids each split delivered to
// it, in order, checking on the way whatever its format promises more. A
// rank must get only the splits it owns; the ranks together must deliver
// each id of want exactly once; each split must deliver the same ids in
// the same order at every world size. Elastic returns each split's ids at
// the first world size.
//
// It asks for no stream type, so that package stream's own tests use it
// as well as those of the drivers.
func Elastic(t testing.TB, splits int, worlds []int, want []int64, read func(world, rank int) map[int][]int64) map[int][]int64 {
	t.Helper()
	reference, err := elastic(splits, worlds, want, read)
	if err != nil {
		t.Fatal(err)
	}
	return reference
}

func elastic(splits int, worlds []int, want []int64, read func(world, rank int) map[int][]int64) (map[int][]int64, error) {
	var reference map[int][]int64
	for _, world := range worlds {
		got := map[int][]int64{}
		once := NewOnce()
		for rank := range world {
			owned := split.Owned(splits, rank, world)
			for s, ids := range read(world, rank) {
				if !slices.Contains(owned, s) {
					return nil, fmt.Errorf("world %d rank %d got rows of split %d", world, rank, s)
				}
				got[s] = append(got[s], ids...)
				once.Add(ids)
			}
		}
		if err := once.Exactly(want); err != nil {
			return nil, fmt.Errorf("world %d: %w", world, err)
		}
		if reference == nil {
			reference = got
			continue
		}
		for s := range splits {
			if !slices.Equal(reference[s], got[s]) {
				return nil, fmt.Errorf("world %d: split %d differs from world %d", world, s, worlds[0])
			}
		}
	}
	return reference, nil
}

// Divisors are the world sizes up to most that divide splits.
func Divisors(splits, most int) []int {
	var out []int
	for w := 1; w <= min(splits, most); w++ {
		if splits%w == 0 {
			out = append(out, w)
		}
	}
	return out
}

// IDs is want for a dataset whose ids number its n rows: 0 to n-1.
func IDs(n int64) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = int64(i)
	}
	return out
}
