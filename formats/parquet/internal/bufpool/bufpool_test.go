package bufpool

import "testing"

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
