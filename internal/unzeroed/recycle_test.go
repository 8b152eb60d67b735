package unzeroed

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

// The Recycler hands out zeroed buffers of the size asked, with no
// capacity past their length (Arrow code writes into capacity as its own),
// keeps freed ones by size class up to its bound, grows a buffer within its
// class in place and zeroes what Reallocate adds, and gives back to the
// allocator underneath everything it holds on release.
func TestRecycler(t *testing.T) {
	under := memory.NewCheckedAllocator(memory.NewGoAllocator())
	r := NewRecycler(under)
	r.Fit(1 << 20)
	a := r.Allocate(1000)
	if len(a) != 1000 || cap(a) != 1000 { // class 1024 (eighths of 1024: 896, 1024)
		t.Fatalf("Allocate(1000): len %d cap %d, want 1000 and 1000", len(a), cap(a))
	}
	for i := range a {
		a[i] = 0xff
	}
	r.Free(a)
	b := r.Allocate(1000) // same class: the buffer a was
	if &b[0] != &a[0] {
		t.Fatal("a freed buffer of the class was not reused")
	}
	for i, x := range b {
		if x != 0 {
			t.Fatalf("reused buffer byte %d is %#x, want zero", i, x)
		}
	}
	b = r.Reallocate(600, b) // shrinks in place
	if &b[0] != &a[0] || len(b) != 600 || cap(b) != 600 {
		t.Fatalf("Reallocate(600): len %d cap %d, moved %v", len(b), cap(b), &b[0] != &a[0])
	}
	b[599] = 7
	b = r.Reallocate(1024, b) // grows in place, within the class
	if &b[0] != &a[0] || b[599] != 7 || cap(b) != 1024 {
		t.Fatal("Reallocate within the class moved or lost a byte")
	}
	for i, x := range b[600:] {
		if x != 0 {
			t.Fatalf("Reallocate byte %d is %#x, want zero", 600+i, x)
		}
	}
	c := r.Reallocate(5000, b) // a larger class: b goes to the pool
	if c[599] != 7 || len(c) != 5000 || cap(c) != 5000 {
		t.Fatal("Reallocate to another class lost the bytes")
	}
	if d := r.Allocate(900); &d[0] != &a[0] {
		t.Fatal("the buffer Reallocate left was not reused")
	} else {
		r.Free(d)
	}
	r.Free(c)
	// A buffer not handed out by the Allocator goes back underneath.
	r.Free(under.Allocate(100))
	// Past the bound, freed buffers go back underneath.
	big := r.Allocate(1 << 20)
	r.Free(big)
	if r.held > r.limit {
		t.Fatalf("holds %d bytes, bound %d", r.held, r.limit)
	}
	r.Release()
	r.Free(r.Allocate(100)) // after release: straight through
	if len(r.out) != 0 {
		t.Fatalf("%d buffers still counted as handed out", len(r.out))
	}
	under.AssertSize(t, 0)
}

// Bound by use, a Recycler holds at most the most bytes it once had
// handed out at once, and at most the bound it is given: a consumer that releases a buffer for every one it
// takes is served from what it released, and what it releases past that
// goes back underneath.
func TestBoundByUse(t *testing.T) {
	under := memory.NewCheckedAllocator(memory.NewGoAllocator())
	r := NewRecycler(under)
	r.BoundByUse(5 * 4096)
	bufs := make([][]byte, 4)
	for i := range bufs {
		bufs[i] = r.Allocate(4096)
	}
	for _, b := range bufs {
		r.Free(b)
	}
	if r.held != 4*4096 {
		t.Fatalf("holds %d bytes after 4 of 4096 freed, want all of them", r.held)
	}
	// A steady consumer: one out at a time, each the one freed before.
	first := r.Allocate(4096)
	for range 100 {
		r.Free(first)
		b := r.Allocate(4096)
		if &b[0] != &first[0] {
			t.Fatal("a steady consumer was not handed the buffer it released")
		}
		first = b
	}
	r.Free(first)
	// Past the most ever out at once, what is freed goes back underneath.
	more := make([][]byte, 6)
	for i := range more {
		more[i] = r.Allocate(4096)
	}
	if r.peakOut != 6*4096 {
		t.Fatalf("peak %d bytes out, want %d", r.peakOut, 6*4096)
	}
	for _, b := range more {
		r.Free(b)
	}
	if r.held != 5*4096 {
		t.Fatalf("holds %d bytes, want the bound's %d (6 out at most, 5 at most held)", r.held, 5*4096)
	}
	r.Release()
	under.AssertSize(t, 0)
}
