package formats

import (
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/sluicedata/sluice/internal/unzeroed"
)

// reuse is the memory a Scan decodes and compacts the batches of a
// fragment with deletes or a filter into (Scan.decodeMemory). compact
// copies a decoded batch's kept rows out and releases it at once, so that
// its buffers come back here for the next batch's copy or decode; a
// delivered batch's come back when its consumer releases it. Left to the
// garbage collector, such a read allocates twice what a plain read does,
// and writing into fresh pages, with the collections that follow, cost
// more than the copy itself: an Iceberg table with a row in a hundred
// deleted by equality spent 15% of its read compacting, 8% here.
//
// Buffers come back only through Free, which Arrow calls when a buffer's
// last holder releases it: one never released is the collector's, as
// with the Go allocator. Nothing here refers to a buffer handed out, only
// to freed ones, up to heldMax bytes.
//
// A buffer is handed out with its capacity equal to its length, as the Go
// allocator's are (Arrow code reads capacity as room it owns), cut from a
// freed one at most an eighth larger than asked; the rest of that one's
// capacity is given up.
type reuse struct {
	mu     sync.Mutex
	free   [][]byte // each len == cap
	held   int
	closed bool // the scan is: what comes back after is the collector's
}

var goAllocator = memory.NewGoAllocator()

const (
	heldMax  = 32 << 20
	freedMax = 256 // buffers held, at most: a search of them is cheap
	minReuse = 1 << 10
)

func (r *reuse) Allocate(size int) []byte {
	b := r.take(size)
	if b == nil {
		return goAllocator.Allocate(size)
	}
	clear(b) // Allocate's contract: zeroed, as the Go allocator's are
	return b
}

// AllocateUnzeroed is a buffer whose every byte the caller writes.
func (r *reuse) AllocateUnzeroed(size int) []byte {
	b := r.take(size)
	if b == nil {
		return unzeroed.Allocator{}.AllocateUnzeroed(size)
	}
	if testing.Testing() {
		// A byte its writer leaves unset shows as a wrong value in
		// the tests, not as a zero or a stale value that happened to
		// be right.
		for i := range b {
			b[i] = 0xa5
		}
	}
	return b
}

func (r *reuse) Reallocate(size int, b []byte) []byte {
	if size <= cap(b) {
		return b[:size]
	}
	nb := r.Allocate(size)
	copy(nb, b)
	r.Free(b)
	return nb
}

// take is the smallest freed buffer of at least size bytes and at most an
// eighth more, cut to size; nil if none.
func (r *reuse) take(size int) []byte {
	if size < minReuse {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	best := -1
	for i, b := range r.free {
		if c := cap(b); c >= size && c <= size+size/8 && (best < 0 || c < cap(r.free[best])) {
			best = i
		}
	}
	if best < 0 {
		return nil
	}
	b := r.free[best]
	last := len(r.free) - 1
	r.free[best], r.free[last] = r.free[last], nil
	r.free = r.free[:last]
	r.held -= cap(b)
	return b[:size:size]
}

func (r *reuse) Free(b []byte) {
	c := cap(b)
	if c < minReuse {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed || r.held+c > heldMax || len(r.free) >= freedMax {
		return // the collector's
	}
	r.free = append(r.free, b[:c:c])
	r.held += c
}

// drop lets the collector have every buffer held, and every one freed
// from now on.
func (r *reuse) drop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.free, r.held, r.closed = nil, 0, true
}

// RuntimeMemory is true: every buffer is the Go runtime's, as the Go
// allocator's are, and one never freed is the collector's (see
// unzeroed.LendingTo: a driver may leave its own memory in the batches).
func (*reuse) RuntimeMemory() bool { return true }

var _ memory.Allocator = (*reuse)(nil)
