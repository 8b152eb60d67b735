package engine

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/sluicedata/sluice/internal/unzeroed"
)

// The recycler hands out zeroed buffers of the size asked, with no
// capacity past their length (Arrow code writes into capacity as its own),
// keeps freed ones by size class up to its bound, grows a buffer within its
// class in place and zeroes what Reallocate adds, and gives back to the
// allocator underneath everything it holds on release.
func TestRecycler(t *testing.T) {
	under := memory.NewCheckedAllocator(memory.NewGoAllocator())
	r := newRecycler(under)
	r.fit(1 << 20)
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
	// A buffer not handed out by the recycler goes back underneath.
	r.Free(under.Allocate(100))
	// Past the bound, freed buffers go back underneath.
	big := r.Allocate(1 << 20)
	r.Free(big)
	if r.held > r.limit {
		t.Fatalf("holds %d bytes, bound %d", r.held, r.limit)
	}
	r.release()
	r.Free(r.Allocate(100)) // after release: straight through
	if len(r.out) != 0 {
		t.Fatalf("%d buffers still counted as handed out", len(r.out))
	}
	under.AssertSize(t, 0)
}

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
		{"permuted into", unzeroedRecycler{newRecycler(unzeroed.Offer(memory.NewGoAllocator()))}, unzeroed.Copy},
	} {
		if got := unzeroed.LendingTo(c.mem); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}
