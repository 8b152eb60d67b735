package unzeroed

import (
	"math/bits"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

// A Recycler is an allocator that hands the buffers freed to it to later
// allocations of their size, so that a stream whose buffers are released
// as fast as they are filled allocates almost nothing new: no
// collections, and no fresh pages for the kernel to fault in.
//
// Buffers are kept by size class, each one aligned as the Go allocator
// aligns them, and handed out zeroed as it hands them out (Arrow code counts
// on that). Classes are eighths of a power of two, so a buffer is at most
// an eighth larger than asked (whole powers of two would waste up to half
// of the decoded window, and show as peak heap). What a Recycler holds is
// bounded (Fit, BoundByUse); past it, freed buffers go back to the allocator
// underneath, as does everything held on release.
//
// A buffer is handed out with its capacity equal to its length: the class's
// spare bytes stay the Recycler's. Arrow code reads a buffer's capacity as
// room it owns (the compute kernels' buffer builders append into cap(b)
// without asking the allocator), so a buffer with spare capacity is one that
// Arrow writes past its length into, and a later Reallocate (which zeroes
// the bytes it adds) wipes what it wrote: strings of "\x00" and out-of-range
// slices in filtered, shuffled reads. The Recycler remembers each buffer it
// handed out by its first byte, which is how Free and Reallocate find its
// class again.
//
// Its zero value is not ready for use: NewRecycler makes one.
type Recycler struct {
	under memory.Allocator

	mu    sync.Mutex
	limit int64 // set by Fit
	// byUse, where set, bounds what is held by the most bytes ever handed
	// out at once too, up to most (BoundByUse): outBytes now, peakOut the
	// most.
	byUse             bool
	most              int64
	outBytes, peakOut int64
	held              int64
	free              map[int][][]byte // by class size; each len == cap == class
	out               map[*byte][]byte // handed out, by first byte: the whole class buffer
	drain             bool
}

// Buffers from 64 bytes to 256 MiB are kept; others pass through.
const (
	minKept = 64
	maxKept = 256 << 20
)

// NewRecycler is a Recycler over under, which it takes new buffers from and
// hands those back to that it does not keep. It keeps nothing until Fit
// or BoundByUse bounds it.
func NewRecycler(under memory.Allocator) *Recycler {
	return &Recycler{under: under, free: map[int][][]byte{}, out: map[*byte][]byte{}}
}

// Fit raises the bound on what r holds to n bytes.
func (r *Recycler) Fit(n int64) {
	r.mu.Lock()
	r.limit = max(r.limit, n)
	r.mu.Unlock()
}

// BoundByUse bounds what r holds by the most bytes it has ever had handed
// out at once, up to most, as well as by Fit: a consumer that releases
// what it is handed at the rate it is handed more finds its next buffers
// held, and r holds at most what the consumer once had in use, or most.
// For an owner that cannot know its working set before it reads (the C
// API's datasets); most keeps a consumer that once held a great deal from
// having r hold as much until it is released.
func (r *Recycler) BoundByUse(most int64) {
	r.mu.Lock()
	r.byUse, r.most = true, most
	r.mu.Unlock()
}

// bound is what r may hold; r.mu is held.
func (r *Recycler) bound() int64 {
	if r.byUse {
		return max(r.limit, min(r.peakOut, r.most))
	}
	return r.limit
}

// lent counts a class buffer of c bytes handed out (c > 0) or back
// (c < 0); r.mu is held.
func (r *Recycler) lent(c int64) {
	r.outBytes += c
	r.peakOut = max(r.peakOut, r.outBytes)
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

// Allocate hands out a zeroed buffer, as Go's allocator does.
func (r *Recycler) Allocate(size int) []byte { return r.allocate(size, true) }

// AllocateUnzeroed hands out a buffer whose every byte its caller sets
// (flatdecode's, see flatdecode.UnzeroedAllocator).
func (r *Recycler) AllocateUnzeroed(size int) []byte { return r.allocate(size, false) }

// Reallocate resizes b, in place where its class has room, zeroing the
// bytes it adds.
func (r *Recycler) Reallocate(size int, b []byte) []byte { return r.reallocate(size, b, true) }

// allocate hands out a buffer of size bytes, zeroed if zero is set.
func (r *Recycler) allocate(size int, zero bool) []byte {
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
		r.lent(int64(c))
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
	if u, ok := r.under.(Offerer); ok && !zero {
		whole = u.AllocateUnzeroed(c)
	} else {
		whole = r.under.Allocate(c)
	}
	if cap(whole) > c {
		whole = whole[:c:c]
	}
	r.mu.Lock()
	r.out[&whole[0]] = whole
	r.lent(int64(len(whole)))
	r.mu.Unlock()
	return whole[:size:size]
}

// ours returns the whole class buffer b was handed out as, if it was, and
// forgets it if forget is set.
func (r *Recycler) ours(b []byte, forget bool) ([]byte, bool) {
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

func (r *Recycler) reallocate(size int, b []byte, zero bool) []byte {
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

// Filled is a Recycler for buffers whose every byte their writer sets (a
// gather's output through its fast paths): zeroing them first would
// write each byte twice.
type Filled struct{ *Recycler }

// Allocate hands out a buffer as AllocateUnzeroed does.
func (u Filled) Allocate(size int) []byte { return u.allocate(size, false) }

// Reallocate resizes b without zeroing what it adds.
func (u Filled) Reallocate(size int, b []byte) []byte { return u.reallocate(size, b, false) }

// Free keeps b for a later buffer of its class, within the bound, or
// hands it to the allocator underneath.
func (r *Recycler) Free(b []byte) {
	whole, ok := r.ours(b, true)
	if !ok {
		// Not one of ours: an empty buffer or one past the largest
		// class, from the allocator underneath.
		r.under.Free(b)
		return
	}
	c := len(whole)
	r.mu.Lock()
	r.lent(-int64(c))
	if r.drain || r.held+int64(c) > r.bound() {
		r.mu.Unlock()
		r.under.Free(whole)
		return
	}
	r.free[c] = append(r.free[c], whole)
	r.held += int64(c)
	r.mu.Unlock()
}

// Release gives every held buffer back to the allocator underneath, and
// every buffer freed from now on.
func (r *Recycler) Release() {
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
	_ memory.Allocator = (*Recycler)(nil)
	_ memory.Allocator = Filled{}
)
