package valuecheck

import (
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/sluicedata/sluice/internal/unzeroed"
)

// Recycling is an allocator over mem that reads as the C API's datasets
// do (unzeroed.Recycler, bound by use): every batch released is memory a
// later window is decoded into, so that a batch read after its release,
// or released by the pipeline while still read, shows another window's
// values. release gives back to mem what it holds.
func Recycling(mem memory.Allocator) (a memory.Allocator, release func()) {
	r := unzeroed.NewRecycler(mem)
	r.BoundByUse(64 << 20)
	return r, r.Release
}
