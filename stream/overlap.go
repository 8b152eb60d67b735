package stream

import (
	"github.com/sluicedata/sluice/formats"
	"github.com/sluicedata/sluice/split"
)

// Overlap is what an epoch's split boundaries cost in bytes fetched more
// than once. A boundary may fall inside a unit (a row group); the splits
// on each side then read part of it. Where the unit can be read by pages
// (a page index), each side fetches about its own rows; where it cannot,
// each side fetches the whole unit.
type Overlap struct {
	// CutUnits is the number of units a split boundary cuts.
	CutUnits int
	// PagedUnits is how many of them are read page by page.
	PagedUnits int
	// Bytes is the stored bytes fetched more than once: for each cut unit
	// without pages, its bytes once for every split past the first that
	// reads part of it.
	Bytes int64
	// RankBytes is this rank's share of Bytes: of each cut unit without
	// pages, the fraction of its readers that are this rank's splits.
	// Summed over the ranks it is Bytes. (Both are bounds: where one rank
	// reads adjacent parts of a unit close together, one fetch serves them.)
	RankBytes int64
}

// Overlap reports what the current epoch fetches twice where split
// boundaries cut units.
func (d *Dataset) Overlap() Overlap {
	d.mu.Lock()
	ep := d.ep
	d.mu.Unlock()
	return overlap(d.data.Fragments, ep, d.opts.Rank, d.opts.WorldSize)
}

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
