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
	// Units are numbered across files (base[f] is file f's first), and
	// counted in slices, not maps: every rank counts every unit of the
	// epoch as it opens, 8,192 of them at a thousand ranks.
	base := make([]int, len(files)+1)
	for f, fr := range files {
		base[f+1] = base[f] + len(fr.Units)
	}
	n := base[len(files)]
	readers := make([]int32, n) // pieces reading some of a unit
	mine := make([]int32, n)    // of them, this rank's
	cut := make([]bool, n)      // units a piece reads part of
	// The distinct passes reading a unit: the first seen, and any other
	// in a map (a unit read by several passes is rare).
	firstPass := make([]int32, n) // pass index + 1
	perPass := make([]int32, n)
	type unitPass struct{ unit, pass int }
	otherPasses := map[unitPass]bool{}
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
				k := base[p.Fragment] + u
				readers[k]++
				if s%world == rank {
					mine[k]++
				}
				if p.Start > lo || p.End < hi {
					cut[k] = true
				}
				switch pass := int32(p.Pass.Index) + 1; {
				case firstPass[k] == 0:
					firstPass[k], perPass[k] = pass, 1
				case firstPass[k] != pass && !otherPasses[unitPass{k, int(pass)}]:
					otherPasses[unitPass{k, int(pass)}] = true
					perPass[k]++
				}
			}
		}
	}
	var o Overlap
	for f, fr := range files {
		for i, u := range fr.Units {
			k := base[f] + i
			if readers[k] == 0 {
				continue
			}
			if cut[k] {
				o.CutUnits++
				if u.Paged {
					o.PagedUnits++
				}
			}
			again := int64(readers[k] - 1)
			if u.Paged {
				again = int64(perPass[k] - 1)
			}
			if again <= 0 {
				continue
			}
			o.Bytes += u.Bytes * again
			o.RankBytes += u.Bytes * again * int64(mine[k]) / int64(readers[k])
		}
	}
	return o
}
