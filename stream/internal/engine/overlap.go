package engine

import (
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
// the bytes fetched twice for them, in all and by rank of world.
func overlap(files []*formats.Fragment, ep *split.Epoch, rank, world int) Overlap {
	type unit struct{ file, index int }
	readers := map[unit]int{} // splits reading part of a unit
	mine := map[unit]int{}    // of them, this rank's
	for s, sp := range ep.Splits {
		for _, p := range sp.Pieces {
			if p.Start < 0 {
				continue // whole units: never cut
			}
			var at int64
			for u, un := range files[p.Fragment].Units {
				lo, hi := at, at+un.Rows
				at = hi
				if hi <= p.Start || lo >= p.End {
					continue
				}
				if p.Start > lo || p.End < hi {
					k := unit{p.Fragment, u}
					readers[k]++
					if s%world == rank {
						mine[k]++
					}
				}
			}
		}
	}
	var o Overlap
	for k, n := range readers {
		u := files[k.file].Units[k.index]
		o.CutUnits++
		if u.Paged {
			o.PagedUnits++
			continue
		}
		o.Bytes += u.Bytes * int64(n-1)
		o.RankBytes += u.Bytes * int64(n-1) * int64(mine[k]) / int64(n)
	}
	return o
}
