package engine

import (
	"math/rand/v2"
	"testing"

	"github.com/sluicedata/sluice/formats"
	"github.com/sluicedata/sluice/permutation"
	"github.com/sluicedata/sluice/split"
)

// overlapByMaps is overlap as it was first written, unit by unit in maps:
// the reference the counting in slices must equal.
func overlapByMaps(files []*formats.Fragment, ep *split.Epoch, rank, world int) Overlap {
	type unit struct{ file, index int }
	type unitPass struct {
		unit
		pass int
	}
	readers, mine, cut := map[unit]int{}, map[unit]int{}, map[unit]bool{}
	passes, perPass := map[unitPass]bool{}, map[unit]int{}
	for s, sp := range ep.Splits {
		for _, p := range sp.Pieces {
			if p.Start < 0 {
				continue
			}
			var lo int64
			for u, un := range files[p.Fragment].Units {
				hi := lo + un.Rows
				if lo < p.End && hi > p.Start {
					k := unit{p.Fragment, u}
					readers[k]++
					if s%world == rank {
						mine[k]++
					}
					if p.Start > lo || p.End < hi {
						cut[k] = true
					}
					if kp := (unitPass{k, p.Pass.Index}); !passes[kp] {
						passes[kp] = true
						perPass[k]++
					}
				}
				lo = hi
			}
		}
	}
	var o Overlap
	for k, n := range readers {
		u := files[k.file].Units[k.index]
		if cut[k] {
			o.CutUnits++
			if u.Paged {
				o.PagedUnits++
			}
		}
		again := int64(n - 1)
		if u.Paged {
			again = int64(perPass[k] - 1)
		}
		if again > 0 {
			o.Bytes += u.Bytes * again
			o.RankBytes += u.Bytes * again * int64(mine[k]) / int64(n)
		}
	}
	return o
}

// overlap counts as the maps did, over random plans, orders (passes
// among them) and ranks.
func TestOverlapAsMaps(t *testing.T) {
	r := rand.New(rand.NewPCG(49, 7))
	cases := 0
	for range 2000 {
		var frags []*formats.Fragment
		var files []split.File
		for range 1 + r.IntN(5) {
			fr := &formats.Fragment{}
			var f split.File
			for range r.IntN(12) {
				u := formats.Unit{Rows: int64(r.IntN(200)), Bytes: int64(r.IntN(1 << 16)), Paged: r.IntN(2) == 0}
				fr.Units = append(fr.Units, u)
				f.Units = append(f.Units, split.Unit{Rows: u.Rows, Bytes: u.Bytes, Paged: u.Paged})
			}
			frags, files = append(frags, fr), append(files, f)
		}
		co := split.ChunkOptions{TargetBytes: 1 + r.Int64N(1<<17), MaxRows: 1 + r.Int64N(300)}
		if r.IntN(2) == 0 {
			co.CutRows, co.CutBytes = 1+r.Int64N(300), r.Int64N(1<<16)
		}
		order := permutation.Order{Shuffle: r.IntN(2) == 0, Seed: r.Uint64(), ShuffleWindow: r.IntN(600), NumSplits: 1 + r.IntN(40), Passes: r.IntN(4), ClumpSize: 1 + r.IntN(8)}
		ep, err := split.NewEpoch(split.Chunks(files, co), order, r.Int64N(3))
		if err != nil {
			continue // an order this plan cannot take
		}
		world := 1 + r.IntN(order.NumSplits)
		rank := r.IntN(world)
		got, want := overlap(frags, ep, rank, world), overlapByMaps(frags, ep, rank, world)
		if got != want {
			t.Fatalf("overlap %+v, by maps %+v (rank %d of %d, order %+v)", got, want, rank, world, order)
		}
		if want.Bytes > 0 {
			cases++
		}
	}
	if cases < 100 {
		t.Fatalf("only %d plans fetched anything twice: the cases test little", cases)
	}
}
