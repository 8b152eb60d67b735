package valuecheck

import (
	"slices"
	"strings"
	"testing"
)

// deal is a stream of ids [0, 12) over 4 splits, split s holding the ids
// congruent to s, that each rank reads whole; bend changes what one read
// returns.
func deal(bend func(world, rank int, got map[int][]int64)) func(world, rank int) map[int][]int64 {
	return func(world, rank int) map[int][]int64 {
		got := map[int][]int64{}
		for s := rank; s < 4; s += world {
			for id := int64(s); id < 12; id += 4 {
				got[s] = append(got[s], id)
			}
		}
		if bend != nil {
			bend(world, rank, got)
		}
		return got
	}
}

func TestElastic(t *testing.T) {
	ref, err := elastic(4, Divisors(4, 4), IDs(12), deal(nil))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ref[1], []int64{1, 5, 9}) {
		t.Fatalf("split 1 delivered %v, want [1 5 9]", ref[1])
	}
	for _, c := range []struct {
		name, err string
		bend      func(world, rank int, got map[int][]int64)
	}{
		{"foreign split", "got rows of split", func(world, rank int, got map[int][]int64) {
			if world == 2 && rank == 1 {
				got[0] = got[1]
				delete(got, 1)
			}
		}},
		{"a row twice", "delivered 2 times", func(world, rank int, got map[int][]int64) {
			if world == 4 && rank == 2 {
				got[2] = append(got[2], 2)
			}
		}},
		{"another order", "split 3 differs", func(world, rank int, got map[int][]int64) {
			if world == 4 && rank == 3 {
				slices.Reverse(got[3])
			}
		}},
	} {
		_, err := elastic(4, Divisors(4, 4), IDs(12), deal(c.bend))
		if err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("%s: got %v, want an error saying %q", c.name, err, c.err)
		}
	}
}

func TestDivisors(t *testing.T) {
	if got := Divisors(12, 4); !slices.Equal(got, []int{1, 2, 3, 4}) {
		t.Fatalf("Divisors(12, 4) = %v", got)
	}
	if got := Divisors(7, 7); !slices.Equal(got, []int{1, 7}) {
		t.Fatalf("Divisors(7, 7) = %v", got)
	}
}
