package formats

import (
	"bytes"
	"testing"
)

// A freed buffer is handed out again, cut to the size asked with no spare
// capacity, zeroed where Allocate asks; one more than an eighth larger
// than asked, or smaller, is not; and nothing is held past the bound or
// after the scan closed.
func TestReuse(t *testing.T) {
	var r reuse
	a := r.AllocateUnzeroed(64 << 10)
	for i := range a {
		a[i] = 7
	}
	r.Free(a)
	if r.held != 64<<10 {
		t.Fatalf("held %d after a free of %d", r.held, 64<<10)
	}
	b := r.Allocate(60 << 10)
	if &b[0] != &a[0] {
		t.Fatal("a freed buffer an eighth larger than asked was not taken again")
	}
	if len(b) != 60<<10 || cap(b) != 60<<10 {
		t.Fatalf("len %d cap %d, want both %d", len(b), cap(b), 60<<10)
	}
	if !bytes.Equal(b, make([]byte, len(b))) {
		t.Fatal("Allocate handed out a reused buffer not zeroed")
	}
	r.Free(b)
	if c := r.AllocateUnzeroed(40 << 10); &c[0] == &b[0] {
		t.Fatal("a buffer half again as large as asked was cut down")
	}
	if c := r.AllocateUnzeroed(61 << 10); &c[0] == &b[0] {
		t.Fatal("a buffer smaller than asked was handed out")
	}
	grown := r.Reallocate(80<<10, r.AllocateUnzeroed(60<<10)) // takes b, grows: b comes back
	if len(grown) != 80<<10 || r.held != 60<<10 {
		t.Fatalf("after a Reallocate that grows: len %d, held %d, want %d and %d", len(grown), r.held, 80<<10, 60<<10)
	}
	for range heldMax / (1 << 20) {
		r.Free(make([]byte, 1<<20))
	}
	if r.held > heldMax {
		t.Fatalf("held %d bytes, past the bound %d", r.held, heldMax)
	}
	r.drop()
	r.Free(make([]byte, 1<<20))
	if r.held != 0 || len(r.free) != 0 {
		t.Fatalf("held %d bytes in %d buffers after the scan closed", r.held, len(r.free))
	}
}
