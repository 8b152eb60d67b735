// Package unzeroed allocates byte buffers that the Go runtime does not
// zero first, for writers that set every byte of what they allocate: the
// Parquet decoder's value buffers, and the engine's gathers and
// concatenations. make([]byte, n) of a buffer about to be written whole
// writes each byte twice, and memory reused from collected buffers is
// zeroed at the allocating goroutine's expense: a tenth of a sequential
// read's CPU on 16 cores (docs/performance.md#unzeroed-buffers).
//
// The buffers come from runtime.mallocgc asked not to zero, through a
// go:linkname the runtime keeps for the packages that use it (pebble, a
// dependency of sluice, among them; see the list above mallocgc in
// runtime/malloc.go). They hold no pointers, so stale bytes in them are
// only ever wrong values, never something the collector follows: which is
// why in test binaries every buffer is filled with 0xa5 first, so that a
// byte its writer left unset shows as a wrong value in the value checks
// rather than as a zero that happened to be right.
//
// It also holds the Recycler (recycle.go), which hands released buffers to
// later allocations of their size, unzeroed where they are asked for so:
// the engine's shuffled windows are decoded into one, and the C API's
// datasets' batches are made of one.
package unzeroed

import (
	"testing"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

//go:linkname mallocgc runtime.mallocgc
func mallocgc(size uintptr, typ unsafe.Pointer, needzero bool) unsafe.Pointer

// Bytes returns a buffer of n bytes, length and capacity, whose bytes are
// whatever the memory held.
func Bytes(n int) []byte {
	if n <= 0 {
		return make([]byte, 0)
	}
	b := unsafe.Slice((*byte)(mallocgc(uintptr(n), nil, false)), n)
	if testing.Testing() {
		for i := range b {
			b[i] = 0xa5
		}
	}
	return b
}

// alignment is what arrow-go's Go allocator aligns its buffers to.
const alignment = 64

// aligned returns n unzeroed bytes starting at a multiple of alignment, as
// arrow-go's Go allocator hands them out (capacity n, no spare room).
func aligned(n int) []byte {
	if n <= 0 {
		return make([]byte, 0)
	}
	b := Bytes(n + alignment - 1)
	shift := int(-uintptr(unsafe.Pointer(&b[0])) & (alignment - 1))
	return b[shift : shift+n : shift+n]
}

// Allocator is an Arrow allocator whose every buffer comes unzeroed, for
// writers that set every byte of the buffers they make (and call
// Reallocate only to grow what they then write whole). Free does nothing:
// the collector takes the buffers, as it takes those of arrow-go's Go
// allocator.
type Allocator struct{}

func (Allocator) Allocate(size int) []byte { return aligned(size) }

// AllocateUnzeroed is Allocate, for writers that ask for unzeroed
// buffers by name (flatdecode.UnzeroedAllocator).
func (Allocator) AllocateUnzeroed(size int) []byte { return aligned(size) }

func (Allocator) Reallocate(size int, b []byte) []byte {
	if size <= cap(b) {
		return b[:size]
	}
	nb := aligned(size)
	copy(nb, b)
	return nb
}

func (Allocator) Free([]byte) {}

// offering is arrow-go's Go allocator, which zeroes what Allocate hands
// out, with unzeroed buffers for the writers that ask for them.
type offering struct{ *memory.GoAllocator }

func (offering) AllocateUnzeroed(size int) []byte { return aligned(size) }

// Offer returns mem with AllocateUnzeroed added where mem is arrow-go's Go
// allocator (memory.DefaultAllocator in a build without cgo allocators):
// its buffers are the collector's either way. Any other allocator is
// returned as it is: a user's allocator counts or pools what it hands out,
// and is to see every buffer.
func Offer(mem memory.Allocator) memory.Allocator {
	if _, ok := mem.(*memory.GoAllocator); ok {
		return offering{memory.NewGoAllocator()}
	}
	return mem
}

// Offerer is an allocator that hands out unzeroed buffers on request: an
// offering, a shuffled read's recycler, the value matrix's filled one.
type Offerer interface {
	AllocateUnzeroed(size int) []byte
}

// Of returns the allocator writers that set every byte allocate from
// where their buffers would come from mem: Allocator where mem is arrow-go's
// Go allocator; where mem offers unzeroed buffers itself, mem with Allocate
// taking them (its Free and Reallocate as they are, so that what it counts
// stays right); mem, and so zeroed buffers, otherwise.
func Of(mem memory.Allocator) (memory.Allocator, bool) {
	switch m := mem.(type) {
	case *memory.GoAllocator, offering, Allocator:
		return Allocator{}, true
	case taking:
		return m, true
	case Offerer:
		return taking{mem, m}, true
	}
	return mem, false
}

// RuntimeMemory reports whether mem's buffers are memory the Go runtime
// allocated and its collector frees: arrow-go's Go allocator, this
// package's allocators over it, or an allocator that says so with a method
// RuntimeMemory() bool (a test's checked allocator over Go's). A reader
// may then hand out a batch built of memory of its own, as a Parquet
// dictionary page whose entries are the batch's values in order, rather
// than copy it into a buffer of mem's: nothing mem counts or frees is
// missed. Any other allocator (one that counts, pins or pools its memory,
// as a shuffled read's recycler does) sees every buffer.
func RuntimeMemory(mem memory.Allocator) bool {
	switch m := mem.(type) {
	case *memory.GoAllocator, offering, Allocator:
		return true
	case taking:
		return RuntimeMemory(m.Allocator)
	case interface{ RuntimeMemory() bool }:
		return m.RuntimeMemory()
	}
	return false
}

// Lending is what a reader may do with memory of its own (a Parquet
// dictionary page, say) that a batch it builds for an allocator could be
// made of instead of a copy.
type Lending int

const (
	// Copy: every buffer of the batch is the allocator's, which is to see
	// them all.
	Copy Lending = iota
	// Keep: the batch may be made of the reader's memory, which is then
	// the collector's for good: a user may hold the batch, or parts of
	// it, for as long as they like (RuntimeMemory).
	Keep
	// Return: as Keep, and the memory may go back to the reader's pool
	// once the last buffer made of it is released, because the allocator's
	// memory is the runtime's and its batches never leave the pipeline
	// that asked for them, which reads nothing of them after releasing
	// them (a shuffled read's recycler over Go's allocator: its decoded
	// windows are permuted into new buffers and released at once). It
	// says so with a method PipelineOnly() bool.
	Return
)

// LendingTo says what a reader may lend a batch built for mem.
func LendingTo(mem memory.Allocator) Lending {
	if t, ok := mem.(taking); ok {
		return LendingTo(t.Allocator)
	}
	if p, ok := mem.(interface{ PipelineOnly() bool }); ok && p.PipelineOnly() {
		return Return
	}
	if RuntimeMemory(mem) {
		return Keep
	}
	return Copy
}

// taking is an allocator that offers unzeroed buffers, its Allocate
// taking them.
type taking struct {
	memory.Allocator
	u Offerer
}

func (t taking) Allocate(size int) []byte { return t.u.AllocateUnzeroed(size) }

var (
	_ memory.Allocator = Allocator{}
	_ memory.Allocator = offering{}
	_ memory.Allocator = taking{}
)
