package engine

import (
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/sluicedata/sluice/internal/unzeroed"
)

// A recycler hands the buffers a shuffled window is decoded into back to
// the next window's decoding. A shuffled window is decoded, permuted into
// new buffers (those the batches are slices of) and its decoded buffers
// released at once: no batch, and so no user, ever sees them. Left to the
// garbage collector, they double what a shuffled epoch allocates against a
// sequential one, and the collections that follow cost a shuffled epoch of
// the bench's table data about a fifth of its throughput (GOGC=300 lifts
// table_shuffled_all from 0.73 to 0.89 of sequential; sequential barely
// moves). Recycled, the decoding allocates almost nothing new.
//
// It is an unzeroed.Recycler, bounded to what a round of decoders reuses
// (permute fits it).
type recycler struct {
	*unzeroed.Recycler
	under memory.Allocator
}

func newRecycler(under memory.Allocator) *recycler {
	return &recycler{Recycler: unzeroed.NewRecycler(under), under: under}
}

// PipelineOnly says that what is decoded into r never leaves the
// pipeline: each window is permuted into new buffers and its decoded
// batches released at once, read by nothing after. A decoder may then lend
// those batches memory of its own and take it back on their release
// (unzeroed.Return), where that memory is the runtime's as r's is:
// another allocator underneath is to see every buffer.
func (r *recycler) PipelineOnly() bool { return unzeroed.RuntimeMemory(r.under) }

// unzeroedRecycler is r for buffers whose every byte their writer sets (a
// gather's output through its fast paths): zeroing them first would
// write each byte twice. Its PipelineOnly is false: a permuted window,
// gathered into it, is what batches are cut from.
type unzeroedRecycler struct{ unzeroed.Filled }

// PipelineOnly is false (see unzeroedRecycler).
func (unzeroedRecycler) PipelineOnly() bool { return false }

var (
	_ memory.Allocator = (*recycler)(nil)
	_ memory.Allocator = unzeroedRecycler{}
)
