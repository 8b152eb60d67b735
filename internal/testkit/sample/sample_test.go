package sample

import (
	"slices"
	"testing"
)

func TestSpread(t *testing.T) {
	all := []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}
	if !testing.Short() {
		if got := Spread(all, 3); !slices.Equal(got, all) {
			t.Fatalf("without -short Spread gave %v, want every element", got)
		}
		if Count(10, 2) != 10 {
			t.Fatal("without -short Count gave the short count")
		}
		return
	}
	for _, c := range []struct {
		n    int
		want []int
	}{
		{0, []int{}},
		{1, []int{0}},
		{2, []int{0, 9}},
		{3, []int{0, 4, 9}},
		{4, []int{0, 3, 6, 9}},
		{10, all},
		{20, all},
	} {
		if got := Spread(all, c.n); !slices.Equal(got, c.want) {
			t.Errorf("Spread(0..9, %d) = %v, want %v", c.n, got, c.want)
		}
	}
	if Count(10, 2) != 2 {
		t.Fatal("under -short Count gave the full count")
	}
}
