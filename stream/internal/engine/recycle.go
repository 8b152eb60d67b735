package engine

import (
	"math/bits"
	"sync"
	"testing"

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
// Buffers are kept by size class, each one aligned as the Go allocator
// aligns them, and handed out zeroed as it hands them out (Arrow code counts
// on that). Classes are eighths of a power of two, so a buffer is at most
// an eighth larger than asked (whole powers of two would waste up to half
// of the decoded window, and show as peak heap). What a recycler holds is
// bounded by limit bytes; past it, freed buffers go back to the allocator
// underneath, as does everything held on release.
//
// A buffer is handed out with its capacity equal to its length: the class's
// spare bytes stay the recycler's. Arrow code reads a buffer's capacity as
// room it owns (the compute kernels' buffer builders append into cap(b)
// without asking the allocator), so a buffer with spare capacity is one that
// Arrow writes past its length into, and a later Reallocate (which zeroes
// the bytes it adds) wipes what it wrote: strings of "\x00" and out-of-range
// slices in filtered, shuffled reads. The recycler remembers each buffer it
// handed out by its first byte, which is how Free and Reallocate find its
// class again.
type recycler struct {
	under memory.Allocator
	limit int64 // set by fit

	mu    sync.Mutex
	held  int64
	free  map[int][][]byte // by class size; each len == cap == class
	out   map[*byte][]byte // handed out, by first byte: the whole class buffer
	drain bool
}

// Buffers from 64 bytes to 256 MiB are kept; others pass through.
const (
	minKept = 64
	maxKept = 256 << 20
)

func newRecycler(under memory.Allocator) *recycler {
	return &recycler{under: under, free: map[int][][]byte{}, out: map[*byte][]byte{}}
}

// fit raises the bound to n bytes: the decoded windows of one round of
// decoders, as a dataset learns their size.
func (r *recycler) fit(n int64) {
	r.mu.Lock()
	r.limit = max(r.limit, n)
	r.mu.Unlock()
}

// classSize is the size class of a buffer of n bytes: n rounded up to an
// eighth of the power of two above it.
func classSize(n int) int {
	if n <= minKept {
		return minKept
	}
	step := 1 << max(bits.Len(uint(n-1))-3, 0)
	return (n + step - 1) &^ (step - 1)
}

func (r *recycler) Allocate(size int) []byte { return r.allocate(size, true) }

// AllocateUnzeroed hands out a buffer whose every byte its caller sets
// (flatdecode's, see flatdecode.UnzeroedAllocator).
func (r *recycler) AllocateUnzeroed(size int) []byte { return r.allocate(size, false) }

func (r *recycler) Reallocate(size int, b []byte) []byte { return r.reallocate(size, b, true) }

// allocate hands out a buffer of size bytes, zeroed if zero is set.
func (r *recycler) allocate(size int, zero bool) []byte {
	c := classSize(size)
	if size == 0 || c > maxKept {
		// An empty buffer has no first byte to know it by.
		return r.under.Allocate(size)
	}
	r.mu.Lock()
	if list := r.free[c]; len(list) > 0 {
		whole := list[len(list)-1]
		r.free[c] = list[:len(list)-1]
		r.held -= int64(c)
		r.out[&whole[0]] = whole
		r.mu.Unlock()
		b := whole[:size:size]
		switch {
		case zero:
			clear(b) // a fresh buffer comes zeroed, a reused one does not
		case testing.Testing():
			// A byte its writer leaves unset shows as a wrong value
			// in the tests, not as a zero that happened to be right.
			for i := range b {
				b[i] = 0xa5
			}
		}
		return b
	}
	r.mu.Unlock()
	var whole []byte
	if u, ok := r.under.(unzeroed.Offerer); ok && !zero {
		whole = u.AllocateUnzeroed(c)
	} else {
		whole = r.under.Allocate(c)
	}
	if cap(whole) > c {
		whole = whole[:c:c]
	}
	r.mu.Lock()
	r.out[&whole[0]] = whole
	r.mu.Unlock()
	return whole[:size:size]
}

// ours returns the whole class buffer b was handed out as, if it was, and
// forgets it if forget is set.
func (r *recycler) ours(b []byte, forget bool) ([]byte, bool) {
	if cap(b) == 0 {
		return nil, false
	}
	p := &b[:1][0]
	r.mu.Lock()
	whole, ok := r.out[p]
	if ok && forget {
		delete(r.out, p)
	}
	r.mu.Unlock()
	return whole, ok
}

func (r *recycler) reallocate(size int, b []byte, zero bool) []byte {
	if whole, ok := r.ours(b, false); ok && size > 0 && size <= cap(whole) {
		// The class has room: the same buffer, its new length its
		// capacity again.
		nb := whole[:size:size]
		if size > len(b) && zero {
			clear(nb[len(b):])
		}
		return nb
	}
	nb := r.allocate(size, zero)
	copy(nb, b)
	r.Free(b)
	return nb
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
// write each byte twice.
type unzeroedRecycler struct{ *recycler }

func (u unzeroedRecycler) Allocate(size int) []byte { return u.allocate(size, false) }

func (u unzeroedRecycler) Reallocate(size int, b []byte) []byte { return u.reallocate(size, b, false) }

// PipelineOnly is false: a permuted window, gathered into u, is what
// batches are cut from.
func (unzeroedRecycler) PipelineOnly() bool { return false }

func (r *recycler) Free(b []byte) {
	whole, ok := r.ours(b, true)
	if !ok {
		// Not one of ours: an empty buffer or one past the largest
		// class, from the allocator underneath.
		r.under.Free(b)
		return
	}
	c := len(whole)
	r.mu.Lock()
	if r.drain || r.held+int64(c) > r.limit {
		r.mu.Unlock()
		r.under.Free(whole)
		return
	}
	r.free[c] = append(r.free[c], whole)
	r.held += int64(c)
	r.mu.Unlock()
}

// release gives every held buffer back to the allocator underneath, and
// every buffer freed from now on.
func (r *recycler) release() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.drain = true
	for _, list := range r.free {
		for _, b := range list {
			r.under.Free(b)
		}
	}
	clear(r.free)
	r.held = 0
}

var (
	_ memory.Allocator = (*recycler)(nil)
	_ memory.Allocator = unzeroedRecycler{}
)
