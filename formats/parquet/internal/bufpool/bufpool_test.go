package bufpool

import (
	"runtime"
	"runtime/debug"
	"slices"
	"testing"
	"time"
)

// Every size is served by a buffer of its class, at most a sixteenth
// larger, and a buffer put back serves later Gets of its class.
func TestClasses(t *testing.T) {
	for _, n := range []int{minKept, minKept + 1, 5000, 65535, 65536, 65537, 1 << 20, 3<<20 + 7, maxKept} {
		c, size := class(n)
		if c < 0 || size < n || size > n+n/16+1 {
			t.Errorf("%d bytes: class %d of %d", n, c, size)
		}
		if c2, size2 := class(size); c2 != c || size2 != size {
			t.Errorf("%d bytes: class %d of %d, but a buffer of %d is in class %d of %d", n, c, size, size, c2, size2)
		}
		b := Get(n)
		if len(b) != n || cap(b) != size {
			t.Errorf("Get(%d): len %d cap %d, want cap %d", n, len(b), cap(b), size)
		}
		Put(b[:n/2]) // a shortened slice goes back to its own class
	}
	for _, n := range []int{0, 1, minKept - 1, maxKept + 1} {
		if c, size := class(n); c >= 0 || size != n {
			t.Errorf("%d bytes: class %d of %d, want none", n, c, size)
		}
	}
}

// collectAndTrim runs a collection and waits for the trim it sets off.
// Automatic collections are off in the tests that call it, so that each
// trim is one of theirs.
func collectAndTrim(t *testing.T) {
	t.Helper()
	before := trims.Load()
	runtime.GC()
	for deadline := time.Now().Add(10 * time.Second); trims.Load() == before; {
		if time.Now().After(deadline) {
			t.Fatal("no trim ran after a collection")
		}
		time.Sleep(time.Millisecond)
	}
}

// Buffers put back outlive collections while reads go on using as many at
// once, and are handed on (to the sync.Pools, which drop them) once Gets
// stop: a process that has stopped reading holds nothing here. What is
// kept is bounded by the most bytes Gets had out at once.
func TestKeptAcrossCollections(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	collectAndTrim(t)
	collectAndTrim(t) // nothing taken: whatever other tests left goes
	if n := keptBytes(); n != 0 {
		t.Fatalf("%d bytes kept with no Gets for two collections", n)
	}
	const n = 1 << 20
	var last []*byte
	for round := range 6 {
		bufs := make([][]byte, 4)
		for i := range bufs {
			bufs[i] = Get(n)
		}
		// The first round's buffers go to the pools (nothing was out in
		// the cycle before), the second's are kept, and from the third on
		// a buffer kept is handed out again.
		if round >= 3 && !slices.ContainsFunc(bufs, func(b []byte) bool { return slices.Contains(last, &b[0]) }) {
			t.Fatalf("round %d: none of the buffers kept across the collection was handed out again", round)
		}
		last = last[:0]
		for _, b := range bufs {
			last = append(last, &b[0])
			Put(b)
		}
		collectAndTrim(t)
		if got := keptBytes(); round >= 1 && (got == 0 || got > 4*int64(classSize(n))) {
			t.Fatalf("round %d: %d bytes kept across a collection, Gets had %d out at once", round, got, 4*n)
		}
	}
	// Reads that use less keep less: at most what they had out at once.
	for range 2 {
		b := Get(n)
		Put(b)
		collectAndTrim(t)
	}
	if got := keptBytes(); got > int64(classSize(n)) {
		t.Errorf("%d bytes kept after collections between which Gets had %d out", got, n)
	}
	collectAndTrim(t)
	collectAndTrim(t)
	if got := keptBytes(); got != 0 {
		t.Errorf("%d bytes kept after two collections without a Get", got)
	}
}

func classSize(n int) int {
	_, size := class(n)
	return size
}

// TestForget: a buffer handed on for good (Forget) is no longer counted as
// out, as one put back is not; a buffer Get did not hand out changes
// nothing.
func TestForget(t *testing.T) {
	out := func() int64 {
		kept.mu.Lock()
		defer kept.mu.Unlock()
		return kept.out
	}
	before := out()
	a, b := Get(100<<10), Get(300<<10)
	if got := out() - before; got < 400<<10 {
		t.Fatalf("%d bytes out after two Gets of 400 KiB in all", got)
	}
	Forget(a)
	Put(b)
	Forget(make([]byte, 5000)) // not a class's size
	if got := out() - before; got != 0 {
		t.Errorf("%d bytes still out after Forget and Put", got)
	}
}
