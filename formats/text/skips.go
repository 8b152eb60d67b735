package text

import (
	"slices"

	"github.com/sluicedata/sluice/formats"
)

// ownedSkips is how many bad rows the counting pass skipped in the units a
// read of rows r answers for. Reads in rows may cut a unit, and a bad row
// lies between good rows, so each unit's skipped rows go to exactly one
// read: the one holding the unit's first row; a unit without rows goes with
// the read holding the row after it (the next unit's first), and trailing
// units without rows go with the read that ends the file. That makes the
// reads of a file report its skipped rows once between them, whichever way
// a plan cuts it.
func (m *meta) ownedSkips(r formats.Range) int64 {
	if m.unitSkipped == nil || m.rowStarts == nil || !r.Known() {
		return 0
	}
	total := m.rowStarts[len(m.rowStarts)-1]
	var n int64
	for u, k := range m.unitSkipped {
		if k == 0 {
			continue
		}
		at := m.rowStarts[u]
		if (at >= r.Start && at < r.End) || (at == total && r.End == total && r.Start < r.End) {
			n += k
		}
	}
	return n
}

// unitOf is the unit whose byte range holds offset at.
func (m *meta) unitOf(at int64) int {
	u, found := slices.BinarySearch(m.bounds, at)
	if !found {
		u--
	}
	return min(max(u, 0), len(m.bounds)-2)
}

// unitCounts is what the plan cache keeps of a counting pass.
type unitCounts struct {
	Rows    []int64 `json:"rows"`
	Skipped []int64 `json:"skipped,omitempty"`
}

func (c unitCounts) fits(units int) bool {
	return len(c.Rows) == units && (c.Skipped == nil || len(c.Skipped) == units)
}
