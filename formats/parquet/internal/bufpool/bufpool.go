// Package bufpool keeps byte buffers of a read (fetched chunks, decompressed
// pages) for later reads, by size: a read allocates as many bytes as the
// row groups it reads store, and allocated anew each time (and zeroed by
// the runtime) they are most of what the garbage collector has to collect.
//
// Buffers are kept in size classes, sixteenths of powers of two (a buffer
// is at most a sixteenth larger than asked), each in a sync.Pool: what is
// not taken again goes with the next collections, as it would have.
package bufpool

import (
	"math/bits"
	"sync"

	"github.com/sluicedata/sluice/internal/unzeroed"
)

// Buffers from 4 KiB to 256 MiB are kept; others are allocated and left to
// the collector.
const (
	minKept = 4 << 10
	maxKept = 256 << 20
)

var pools [64 * 16]sync.Pool // of *[]byte, by class

// class is the pool of buffers of n bytes and their capacity, or -1.
func class(n int) (c, size int) {
	if n < minKept || n > maxKept {
		return -1, n
	}
	e := bits.Len(uint(n - 1)) // 1<<(e-1) < n <= 1<<e
	step := 1 << (e - 5)       // a sixteenth of 1<<(e-1)
	k := (n + step - 1) / step // in (16, 32]
	return e*16 + k - 17, k * step
}

// Get returns a buffer of n bytes. It is not zeroed: it may hold what an
// earlier user left in it.
func Get(n int) []byte {
	c, size := class(n)
	if c < 0 {
		return unzeroed.Bytes(n)
	}
	if p, ok := pools[c].Get().(*[]byte); ok {
		return (*p)[:n]
	}
	return unzeroed.Bytes(size)[:n]
}

// Put hands b, from Get, to later Gets. Nothing may use b after. A buffer
// that Get did not make (of another capacity) is left to the collector.
func Put(b []byte) {
	c, size := class(len(b))
	if c < 0 || cap(b) != size {
		// A slice shortened after Get: its class is that of its capacity.
		if c, size = class(cap(b)); c < 0 || cap(b) != size {
			return
		}
	}
	b = b[:size]
	pools[c].Put(&b)
}
