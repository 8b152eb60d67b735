package engine

import (
	"slices"

	"github.com/sluicedata/sluice/formats"
	"github.com/sluicedata/sluice/split"
)

// Overlap is what an epoch's split boundaries cost in bytes fetched more
// than once: the figures stream.Overlap documents, field for field.
type Overlap struct {
	CutUnits   int
	PagedUnits int
	Bytes      int64
	RankBytes  int64
}

// Overlap reports what the current epoch fetches twice where split
// boundaries cut units.
func (e *Engine) Overlap() Overlap {
	e.mu.Lock()
	ep := e.ep
	e.mu.Unlock()
	return overlap(e.data.Fragments, ep, e.opts.Rank, e.opts.WorldSize)
}

// overlap counts the units of files that ep's split boundaries cut, and
// the bytes fetched more than once, in all and by rank of world: a unit
// that several splits' pieces read is fetched by each (by each of its
// passes only, where it has a page index and a piece reads only its
// pages), and with passes every unit is read once per pass.
func overlap(files []*formats.Fragment, ep *split.Epoch, rank, world int) Overlap {
	type unit struct{ file, index int }
	type unitPass struct {
		unit
		pass int
	}
	readers := map[unit]int{} // pieces reading some of a unit
	mine := map[unit]int{}    // of them, this rank's
	cut := map[unit]bool{}    // units a piece reads part of
	passes := map[unitPass]bool{}
	perPass := map[unit]int{} // distinct passes reading a unit
	// starts[f][u] is the row unit u of file f starts at: a piece's units
	// are found by search, not by a walk of its file's units, which at
	// thousands of splits over files of hundreds of units was most of a
	// rank's start.
	starts := make([][]int64, len(files))
	for s, sp := range ep.Splits {
		for _, p := range sp.Pieces {
			if p.Start < 0 {
				continue // whole units: never cut
			}
			units := files[p.Fragment].Units
			if starts[p.Fragment] == nil {
				at := make([]int64, len(units)+1)
				for u, un := range units {
					at[u+1] = at[u] + un.Rows
				}
				starts[p.Fragment] = at
			}
			at := starts[p.Fragment]
			first, _ := slices.BinarySearch(at, p.Start+1)
			for u := max(first-1, 0); u < len(units); u++ {
				lo, hi := at[u], at[u+1]
				if lo >= p.End {
					break
				}
				if hi <= p.Start {
					continue
				}
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
		if again <= 0 {
			continue
		}
		o.Bytes += u.Bytes * again
		o.RankBytes += u.Bytes * again * int64(mine[k]) / int64(n)
	}
	return o
}
