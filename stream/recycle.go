package stream

import (
	"math/bits"
	"sync"

	"github.com/apache/arrow-go/v18/arrow/memory"
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
// Buffers are kept by power-of-two size, each one aligned as the Go
// allocator aligns them, and handed out zeroed as it hands them out (Arrow
// code counts on that). What a recycler holds is bounded by limit bytes;
// past it, freed buffers go back to the allocator underneath, as does
// everything held on drain.
type recycler struct {
	under memory.Allocator
	limit int64 // set by fit

	mu    sync.Mutex
	held  int64
	free  [maxClass + 1][][]byte
	drain bool
}

// Size classes: 64 bytes (class 6) to 256 MiB (class 28); larger buffers
// are not kept.
const (
	minClass = 6
	maxClass = 28
	align    = 64
)

func newRecycler(under memory.Allocator) *recycler {
	return &recycler{under: under}
}

// fit raises the bound to n bytes: the decoded windows of one round of
// decoders, as a dataset learns their size.
func (r *recycler) fit(n int64) {
	r.mu.Lock()
	r.limit = max(r.limit, n)
	r.mu.Unlock()
}

// class is the size class of a buffer of n bytes: the least c with
// 1<<c >= n, at least minClass.
func class(n int) int {
	if n <= 1<<minClass {
		return minClass
	}
	return bits.Len(uint(n - 1))
}

func (r *recycler) Allocate(size int) []byte {
	c := class(size)
	if c > maxClass {
		return r.under.Allocate(size)
	}
	r.mu.Lock()
	if k := len(r.free[c]); k > 0 {
		b := r.free[c][k-1]
		r.free[c] = r.free[c][:k-1]
		r.held -= int64(cap(b))
		r.mu.Unlock()
		b = b[:size]
		clear(b)
		return b
	}
	r.mu.Unlock()
	b := r.under.Allocate(1 << c)
	return b[: size : 1<<c]
}

func (r *recycler) Reallocate(size int, b []byte) []byte {
	if cap(b) >= size {
		old := len(b)
		b = b[:size]
		if size > old {
			clear(b[old:])
		}
		return b
	}
	nb := r.Allocate(size)
	copy(nb, b)
	r.Free(b)
	return nb
}

func (r *recycler) Free(b []byte) {
	c := class(cap(b))
	if cap(b) != 1<<c || c > maxClass || cap(b) == 0 {
		// Not one of ours: a buffer of another size came from the
		// allocator underneath (or Allocate(0)).
		r.under.Free(b)
		return
	}
	r.mu.Lock()
	if r.drain || r.held+int64(cap(b)) > r.limit {
		r.mu.Unlock()
		r.under.Free(b[:cap(b)])
		return
	}
	r.free[c] = append(r.free[c], b[:0])
	r.held += int64(cap(b))
	r.mu.Unlock()
}

// release gives every held buffer back to the allocator underneath, and
// every buffer freed from now on.
func (r *recycler) release() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.drain = true
	for c := range r.free {
		for _, b := range r.free[c] {
			r.under.Free(b[:cap(b)])
		}
		r.free[c] = nil
	}
	r.held = 0
}

var _ memory.Allocator = (*recycler)(nil)
