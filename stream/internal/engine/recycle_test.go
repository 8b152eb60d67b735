package engine

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/sluicedata/sluice/internal/unzeroed"
)

// A decoder may lend a recycler's batches memory to be returned on their
// release only where the recycler is over the runtime's memory: over any
// other allocator, that allocator sees every buffer. What is permuted into
// a recycler is cut into batches, and is lent nothing.
func TestRecyclerLending(t *testing.T) {
	for _, c := range []struct {
		name string
		mem  memory.Allocator
		want unzeroed.Lending
	}{
		{"over Go's", newRecycler(unzeroed.Offer(memory.NewGoAllocator())), unzeroed.Return},
		{"over a checked allocator", newRecycler(memory.NewCheckedAllocator(memory.NewGoAllocator())), unzeroed.Copy},
		{"permuted into", unzeroedRecycler{unzeroed.Filled{Recycler: newRecycler(unzeroed.Offer(memory.NewGoAllocator())).Recycler}}, unzeroed.Copy},
	} {
		if got := unzeroed.LendingTo(c.mem); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}
